// Package curatorpb holds the curator's protobuf messages and gRPC services.
//
// The Go code is generated from curator.proto; run `go generate ./proto` after
// changing it. CI fails when the committed code is stale.
package curatorpb

//go:generate sh -c "cd .. && go tool -modfile=tools.mod buf generate"
