package main

import (
	_ "go.etcd.io/etcd/client/v3"
	_ "go.etcd.io/etcd/client/v3/concurrency"
	_ "go.etcd.io/etcd/server/v3/embed"
	_ "go.etcd.io/etcd/tests/v3/framework/integration"
	_ "github.com/spf13/cobra"
	_ "go.uber.org/zap"
	_ "google.golang.org/grpc"
	_ "google.golang.org/protobuf/proto"
	_ "github.com/google/go-cmp/cmp"
	_ "github.com/prometheus/client_golang/prometheus"
	_ "go.uber.org/goleak"
	_ "sigs.k8s.io/yaml"
)

func main() {}
