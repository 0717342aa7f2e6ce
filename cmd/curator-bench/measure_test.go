package main

import (
	"os"
	"slices"
	"testing"
	"time"

	"github.com/curatorproject/curator/curator/spec"
	"github.com/curatorproject/curator/node"
	"github.com/curatorproject/curator/provider/process"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/google/go-cmp/cmp"
)

func TestHistIndexMid(t *testing.T) {
	for _, us := range []uint64{0, 1, 63, 64, 65, 127, 128, 1000, 12345, 1e6, 1e8, 1 << 40} {
		i := histIndex(us)
		if i < 0 || i >= histBuckets {
			t.Fatalf("histIndex(%d) = %d, out of [0, %d)", us, i, histBuckets)
		}
		mid := histMid(i)
		if diff := (mid - float64(us)) / max(float64(us), 1); diff > 0.035 || diff < -0.035 {
			t.Errorf("histMid(histIndex(%d)) = %.1f, off by %.1f%%", us, mid, 100*diff)
		}
	}
	for us := uint64(1); us < 1<<20; us = us*2 + 1 {
		if histIndex(us+1) < histIndex(us) {
			t.Fatalf("histIndex not monotonic at %d", us)
		}
	}
}

func TestLatencyHistQuantile(t *testing.T) {
	h := &latencyHist{}
	if got := h.quantile(0.5); got != 0 {
		t.Errorf("empty: quantile(0.5) = %s, want 0", got)
	}
	for i := 1; i <= 100; i++ {
		h.record(time.Duration(i) * time.Millisecond)
	}
	for _, tc := range []struct {
		q    float64
		want time.Duration
	}{{0.5, 50 * time.Millisecond}, {0.99, 99 * time.Millisecond}, {1, 100 * time.Millisecond}} {
		got := h.quantile(tc.q)
		if d := got - tc.want; d > tc.want/30 || d < -tc.want/30 {
			t.Errorf("quantile(%v) = %s, want %s within 3%%", tc.q, got, tc.want)
		}
	}
	if got := h.maximum(); got != 100*time.Millisecond {
		t.Errorf("maximum = %s, want 100ms", got)
	}
}

func TestQuantile(t *testing.T) {
	ds := func(ms ...int) []time.Duration {
		var out []time.Duration
		for _, m := range ms {
			out = append(out, time.Duration(m)*time.Millisecond)
		}
		return out
	}
	for _, tc := range []struct {
		name string
		d    []time.Duration
		q    float64
		want time.Duration
	}{
		{"empty", nil, 0.5, 0},
		{"one", ds(7), 0.99, 7 * time.Millisecond},
		{"median of odd", ds(3, 1, 2), 0.5, 2 * time.Millisecond},
		{"median of even: the lower", ds(4, 1, 3, 2), 0.5, 2 * time.Millisecond},
		{"p99 of 20: the largest", ds(1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20), 0.99, 20 * time.Millisecond},
	} {
		if got := quantile(tc.d, tc.q); got != tc.want {
			t.Errorf("%s: quantile(%v) = %s, want %s", tc.name, tc.q, got, tc.want)
		}
	}
}

func TestProcReaders(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc")
	}
	// Burn a little CPU so the figure moves.
	c0, err := procCPU(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	x := 0
	for end := time.Now().Add(100 * time.Millisecond); time.Now().Before(end); {
		x++
	}
	c1, err := procCPU(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if c1 < c0 {
		t.Errorf("CPU time went back: %s then %s", c0, c1)
	}
	rss, err := procRSS(os.Getpid())
	if err != nil || rss == 0 {
		t.Errorf("procRSS = %d, %v; want a size", rss, err)
	}
	if busy, total, err := hostCPU(); err != nil || total == 0 || busy > total {
		t.Errorf("hostCPU = %g, %g, %v", busy, total, err)
	}
	_ = x
}

func TestSimAddress(t *testing.T) {
	addrs, err := process.AddressRange("127.0.150.13-127.0.150.20", 1)
	if err != nil {
		t.Fatal(err)
	}
	got := []string{simAddress(addrs[0], 0), simAddress(addrs[0], 1), simAddress(addrs[0], simPortsPerIP)}
	want := []string{"127.0.150.13:10000", "127.0.150.13:10001", "127.0.150.14:10000"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("simAddress (-want +got):\n%s", diff)
	}
}

func TestStreamErrorKey(t *testing.T) {
	paced, err := status.New(codes.Unavailable, "this manager admits no more sessions right now").
		WithDetails(&errdetails.ErrorInfo{Reason: spec.SessionsPacedReason, Domain: spec.ErrorDomain})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		st   *status.Status
		want string
	}{
		{paced, "session: Unavailable SESSIONS_PACED"},
		{nil, "session: moved off the leader"},
		{status.New(codes.Unavailable, `connection error: desc = "transport: Error while dialing: dial tcp 127.0.150.10:7000: connect: connection refused"`), "session: Unavailable (refused)"},
		{status.New(codes.Unavailable, "connection error: desc = \"transport: authentication handshake failed: context deadline exceeded\""), "session: Unavailable (tls handshake)"},
		{status.New(codes.Unavailable, `connection error: desc = "transport: Error while dialing: dial tcp 127.0.150.11:7000: i/o timeout"`), "session: Unavailable (connect timeout)"},
		{status.New(codes.Unavailable, `connection error: desc = "error reading server preface: read tcp 127.0.0.1:1->127.0.150.11:7000: use of closed network connection"`), "session: Unavailable (no server preface)"},
		{status.New(codes.Canceled, "context canceled while waiting for connections to become ready"), "session: Canceled (no connection ready)"},
		{status.New(codes.Unavailable, "error reading from server: EOF"), "session: Unavailable (eof)"},
		{status.New(codes.Unknown, "EOF"), "session: Unknown (eof)"},
		{status.New(codes.PermissionDenied, "node x was removed"), "session: PermissionDenied"},
	} {
		err := error(node.ErrSessionMoved)
		if tc.st != nil {
			err = tc.st.Err()
		}
		if got := streamErrorKey("session", err); got != tc.want {
			t.Errorf("streamErrorKey(%v) = %q, want %q", err, got, tc.want)
		}
	}
}

func TestCounters(t *testing.T) {
	body := []byte(`# HELP etcd_mvcc_put_total Total number of puts seen by this member.
# TYPE etcd_mvcc_put_total counter
etcd_mvcc_put_total 1234
# HELP etcd_mvcc_delete_total Total number of deletes seen by this member.
# TYPE etcd_mvcc_delete_total counter
etcd_mvcc_delete_total 5.6e+01
# TYPE curator_sessions_refused_total counter
curator_sessions_refused_total{reason="paced"} 7
curator_sessions_refused_total 3
`)
	for _, tc := range []struct {
		names   []string
		want    []float64
		wantErr string
	}{
		{[]string{"etcd_mvcc_put_total", "etcd_mvcc_delete_total"}, []float64{1234, 56}, ""},
		{[]string{"curator_sessions_refused_total"}, []float64{3}, ""}, // the unlabelled one
		{[]string{"etcd_mvcc_put_total", "etcd_mvcc_range_total"}, nil, "no etcd_mvcc_range_total"},
	} {
		got, err := counters(body, tc.names...)
		if tc.wantErr != "" {
			if err == nil || err.Error() != tc.wantErr {
				t.Errorf("counters(%v): %v, %v; want the error %q", tc.names, got, err, tc.wantErr)
			}
			continue
		}
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("counters(%v) = %v, %v; want %v", tc.names, got, err, tc.want)
		}
	}
	if _, err := counters([]byte("etcd_mvcc_put_total one\n"), "etcd_mvcc_put_total"); err == nil {
		t.Error("a value that is not a number: no error")
	}
}

// TestJoinOwnCPU: the sessions of the nodes joined before are taken out
// of a join's CPU as half the wave at the rest rate.
func TestJoinOwnCPU(t *testing.T) {
	j := joinFigures{Joined: 3000, JoinS: 90.4, JoinManagersCPUMsPerJoin: 12.348}
	rest := &restFigures{LeaderCPUPct: 8.5, FollowersCPUPct: []float64{12, 8.028}}
	// 0.28528 cores for 45.2 s over 3,000 joins: 4.298 ms.
	if got, want := joinOwnCPU(j, rest), 8.05; got < want-0.01 || got > want+0.01 {
		t.Errorf("joinOwnCPU = %v, want %v", got, want)
	}
	if got := joinOwnCPU(joinFigures{}, rest); got != 0 {
		t.Errorf("joinOwnCPU with no joins = %v, want 0", got)
	}
	if got := joinOwnCPU(j, nil); got != 0 {
		t.Errorf("joinOwnCPU with no rest figures = %v, want 0", got)
	}
}
