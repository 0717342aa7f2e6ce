package main

import (
	"context"
	"errors"
	"strconv"
	"testing"

	"github.com/google/go-cmp/cmp"

	pb "github.com/curatorproject/curator/proto"
)

func TestListPages(t *testing.T) {
	views := func(ids ...string) []*pb.NodeView {
		var out []*pb.NodeView
		for _, id := range ids {
			out = append(out, &pb.NodeView{Node: &pb.Node{Id: id}})
		}
		return out
	}
	// pager serves ids in pages of size (all at once if 0), with the
	// index of the next page as token, or loops on one token.
	pager := func(ids []string, size int, loop bool) func(context.Context, *pb.ListNodesRequest) (*pb.ListNodesResponse, error) {
		return func(_ context.Context, req *pb.ListNodesRequest) (*pb.ListNodesResponse, error) {
			from := 0
			if req.PageToken != "" {
				var err error
				if from, err = strconv.Atoi(req.PageToken); err != nil {
					return nil, err
				}
			}
			if size == 0 {
				return &pb.ListNodesResponse{Nodes: views(ids...)}, nil
			}
			to := min(from+size, len(ids))
			resp := &pb.ListNodesResponse{Nodes: views(ids[from:to]...)}
			switch {
			case loop:
				resp.NextPageToken = "1"
			case to < len(ids):
				resp.NextPageToken = strconv.Itoa(to)
			}
			return resp, nil
		}
	}
	ids := []string{"a", "b", "c", "d", "e"}
	for _, tc := range []struct {
		name      string
		list      func(context.Context, *pb.ListNodesRequest) (*pb.ListNodesResponse, error)
		wantIDs   []string
		wantPages int
		wantErr   bool
	}{
		{"no paging", pager(ids, 0, false), ids, 1, false},
		{"pages of 2", pager(ids, 2, false), ids, 3, false},
		{"pages of 5", pager(ids, 5, false), ids, 1, false},
		{"a token that repeats", pager(ids, 1, true), nil, 2, true},
		{"an error", func(context.Context, *pb.ListNodesRequest) (*pb.ListNodesResponse, error) {
			return nil, errors.New("boom")
		}, nil, 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nodes, pages, _, err := listPages(context.Background(), 2, tc.list)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, want error %v", err, tc.wantErr)
			}
			var got []string
			for _, n := range nodes {
				got = append(got, n.GetNode().GetId())
			}
			if diff := cmp.Diff(tc.wantIDs, got); diff != "" {
				t.Errorf("nodes (-want +got):\n%s", diff)
			}
			if pages != tc.wantPages {
				t.Errorf("pages = %d, want %d", pages, tc.wantPages)
			}
		})
	}
}
