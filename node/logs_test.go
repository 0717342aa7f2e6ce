package node

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/types/known/timestamppb"

	pb "github.com/curatorproject/curator/proto"
)

// testRing is a ring of max lines whose clock is a minute per line from
// t0: lines "a", "b", ... written at t0, t0+1m, ...
func testRing(max int, t0 time.Time, writes ...string) *LogRing {
	r := NewLogRing(max)
	now := t0
	r.now = func() time.Time { t := now; now = now.Add(time.Minute); return t }
	for _, w := range writes {
		_, _ = r.Write([]byte(w))
	}
	return r
}

func ringTexts(t *testing.T, r *LogRing, req *pb.LogsRequest) []string {
	t.Helper()
	var got []string
	if err := r.Logs(context.Background(), req, func(lines []*pb.LogLine) error {
		for _, l := range lines {
			got = append(got, l.Text)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return got
}

// TestLogRing: the ring keeps the last lines written, whole lines only
// (a line's end may come in a later write), a long line cut, and gives
// those a request asks for.
func TestLogRing(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 0, 0, time.UTC)
	long := strings.Repeat("x", MaxLogLine+10)
	for _, tc := range []struct {
		name   string
		max    int
		writes []string
		req    *pb.LogsRequest
		want   []string
	}{
		{"whole lines", 10, []string{"a\nb\n", "c"}, &pb.LogsRequest{}, []string{"a", "b"}},
		{"a line in two writes", 10, []string{"a\nb", "c\n"}, &pb.LogsRequest{}, []string{"a", "bc"}},
		{"the last max", 3, []string{"a\nb\nc\nd\ne\n"}, &pb.LogsRequest{}, []string{"c", "d", "e"}},
		{"tail", 10, []string{"a\nb\nc\n"}, &pb.LogsRequest{Tail: 2}, []string{"b", "c"}},
		{"since", 10, []string{"a\nb\nc\n"}, &pb.LogsRequest{Since: timestamppb.New(t0.Add(time.Minute))}, []string{"b", "c"}},
		{"since and tail", 10, []string{"a\nb\nc\nd\n"}, &pb.LogsRequest{Since: timestamppb.New(t0.Add(time.Minute)), Tail: 1}, []string{"d"}},
		{"nothing since", 10, []string{"a\n"}, &pb.LogsRequest{Since: timestamppb.New(t0.Add(time.Hour))}, nil},
		{"a long line is cut", 10, []string{long + "\n"}, &pb.LogsRequest{}, []string{long[:MaxLogLine] + "... (10 bytes cut)"}},
		{"a long line in parts is cut", 10, []string{long[:MaxLogLine/2], long[MaxLogLine/2:], "\nz\n"}, &pb.LogsRequest{}, []string{long[:MaxLogLine] + "... (1 bytes cut)", "z"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := testRing(tc.max, t0, tc.writes...)
			if diff := cmp.Diff(tc.want, ringTexts(t, r, tc.req)); diff != "" {
				t.Errorf("lines (-want +got):\n%s", diff)
			}
		})
	}
}

// TestLogRingFollow: a follow sends the lines kept, then each new line,
// until its context ends.
func TestLogRingFollow(t *testing.T) {
	r := testRing(100, time.Now(), "a\nb\n")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	got := make(chan string, 10)
	done := make(chan error, 1)
	go func() {
		done <- r.Logs(ctx, &pb.LogsRequest{Tail: 1, Follow: true}, func(lines []*pb.LogLine) error {
			for _, l := range lines {
				got <- l.Text
			}
			return nil
		})
	}()
	next := func(want string) {
		t.Helper()
		select {
		case g := <-got:
			if g != want {
				t.Errorf("line %q, want %q", g, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("no line %q", want)
		}
	}
	next("b")
	_, _ = r.Write([]byte("c\nd\n"))
	next("c")
	next("d")
	cancel()
	select {
	case err := <-done:
		if err != context.Canceled {
			t.Errorf("follow ended with %v, want context.Canceled", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("follow did not end with its context")
	}
}
