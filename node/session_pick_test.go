package node

import (
	"context"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials"

	"github.com/curatorproject/curator/pki/pkitest"
)

// TestPickSkipsASilentManager: with the first choice a manager that
// accepts connections and never answers (a frozen process, or its packets
// dropped past the SYN), pick dials the next a quarter of the wait later
// and picks it as soon as its TLS connection is up, and closes the
// connection it dialled to the silent one. A first choice that is up is
// picked at once.
func TestPickSkipsASilentManager(t *testing.T) {
	tt := pkitest.New(t)
	good := tlsManager(t, tt)
	// A silent manager: TCP accepts, nothing ever answers.
	silent, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { silent.Close() })
	go func() {
		var held []net.Conn
		defer func() {
			for _, c := range held {
				c.Close()
			}
		}()
		for {
			c, err := silent.Accept()
			if err != nil {
				return
			}
			held = append(held, c)
		}
	}()

	s, err := NewSession(SessionConfig{TLS: tt.Client, Managers: func() []string { return nil }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	const wait = 2 * time.Second
	start := time.Now()
	got := s.conns.pick(context.Background(), []string{silent.Addr().String(), good}, wait)
	took := time.Since(start)
	if got != good {
		t.Fatalf("picked %s, want the manager that answers, %s", got, good)
	}
	if took < wait/4 || took > wait/2 {
		t.Errorf("picked after %s, want just after the head start of %s", took, wait/4)
	}
	s.conns.mu.Lock()
	_, kept := s.conns.conns[silent.Addr().String()]
	s.conns.mu.Unlock()
	if kept {
		t.Error("the connection dialled to the silent manager was kept")
	}

	// Now up: picked at once, even second in line.
	start = time.Now()
	if got := s.conns.pick(context.Background(), []string{good, silent.Addr().String()}, wait); got != good {
		t.Errorf("picked %s, want %s", got, good)
	}
	if took := time.Since(start); took > wait/8 {
		t.Errorf("a manager already up was picked after %s", took)
	}
	c, err := s.conns.conn(good)
	if err != nil {
		t.Fatal(err)
	}
	if st := c.GetState(); st != connectivity.Ready {
		t.Errorf("the connection to the picked manager is %s, want READY", st)
	}
	if _, err := NewSession(SessionConfig{Managers: func() []string { return nil }}); err == nil {
		t.Error("a session without TLS was accepted")
	}
	if _, err := NewSession(SessionConfig{TLS: tt.Client}); err == nil {
		t.Error("a session without a manager list was accepted")
	}
}

// TestPickGivesUpWhenEveryManagerFails: managers that close every
// connection at once (a manager shedding handshakes, or refusing): pick
// dials the next as soon as the first fails, gives up once each failed
// once, long before its wait, having dialled each once: gRPC's own
// reconnects are not left to knock again meanwhile.
func TestPickGivesUpWhenEveryManagerFails(t *testing.T) {
	var addrs []string
	accepts := make([]atomic.Int32, 2)
	for i := range accepts {
		addrs = append(addrs, closingManager(t, &accepts[i]))
	}
	s, err := NewSession(SessionConfig{TLS: pkitest.New(t).Client, Managers: func() []string { return nil }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	const wait = 4 * time.Second
	start := time.Now()
	got := s.conns.pick(context.Background(), addrs, wait)
	took := time.Since(start)
	if got != addrs[0] {
		t.Errorf("picked %s, want the first choice when none is up", got)
	}
	if took > wait/8 {
		t.Errorf("gave up after %s, want at once (the wait is %s)", took, wait)
	}
	for i := range accepts {
		if n := accepts[i].Load(); n != 1 {
			t.Errorf("manager %d was dialled %d times during the pick, want once", i, n)
		}
	}
	s.conns.mu.Lock()
	_, kept := s.conns.conns[addrs[1]]
	s.conns.mu.Unlock()
	if kept {
		t.Error("the connection dialled to the second manager was kept")
	}
}

// TestPickStopsAtTheFirstThatAnswers: the first choice closes every
// connection at once; pick dials the next alone, picks it as it comes
// up, and never dials the last (a manager that failed the node lately,
// a dead one), and counts the first's failure against it: the next order
// puts it last.
func TestPickStopsAtTheFirstThatAnswers(t *testing.T) {
	tt := pkitest.New(t)
	good := tlsManager(t, tt)
	var firstAccepts, lastAccepts atomic.Int32
	first, last := closingManager(t, &firstAccepts), closingManager(t, &lastAccepts)

	s, err := NewSession(SessionConfig{TLS: tt.Client, Managers: func() []string { return nil }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	const wait = 4 * time.Second
	start := time.Now()
	got := s.conns.pick(context.Background(), []string{first, good, last}, wait)
	if took := time.Since(start); got != good || took > wait/8 {
		t.Errorf("picked %s after %s, want %s at once", got, took, good)
	}
	if n := firstAccepts.Load(); n != 1 {
		t.Errorf("the first choice was dialled %d times, want once", n)
	}
	if n := lastAccepts.Load(); n != 0 {
		t.Errorf("the last choice was dialled %d times, want never: the second answered", n)
	}
	mgrs := []string{first, good, last}
	for range len(mgrs) {
		if o := s.conns.order(mgrs, time.Now()); o[len(o)-1] != first {
			t.Errorf("order after the first choice failed: %v, want it last", o)
		}
	}
}

// TestStaleness: a manager that failed a node is tried last for 5 s,
// twice as long with each failure in a row, at most a minute; a session
// the leader answered through it starts the count again.
func TestStaleness(t *testing.T) {
	for n, want := range map[int]time.Duration{1: 5 * time.Second, 2: 10 * time.Second, 3: 20 * time.Second, 4: 40 * time.Second, 5: time.Minute, 50: time.Minute} {
		if got := staleFor(n); got != want {
			t.Errorf("staleFor(%d) = %s, want %s", n, got, want)
		}
	}
	mc := &managerConns{failed: map[string]managerFailure{}, avoid: map[string]time.Time{}}
	mgrs := []string{"a:1", "b:1"}
	t0 := time.Unix(1000, 0)
	lastAt := func(at time.Duration) string {
		o := mc.order(mgrs, t0.Add(at))
		return o[len(o)-1]
	}
	mc.noteFailure("a:1", t0)
	mc.noteFailure("a:1", t0)
	mc.noteFailure("a:1", t0)
	for _, at := range []time.Duration{0, 10 * time.Second, 19 * time.Second} {
		for range len(mgrs) {
			if got := lastAt(at); got != "a:1" {
				t.Errorf("%s after its third failure in a row, %s is last, want a:1", at, got)
			}
		}
	}
	seen := map[string]bool{}
	for range len(mgrs) {
		seen[lastAt(21*time.Second)] = true
	}
	if !seen["b:1"] {
		t.Errorf("21 s after a:1's third failure in a row it is still last every time, want the rotation back")
	}
	mc.noteEnd("a:1", t0, true)
	seen = map[string]bool{}
	for range len(mgrs) {
		seen[lastAt(6*time.Second)] = true
	}
	if !seen["b:1"] {
		t.Errorf("6 s after a session through a:1 that was up, a:1 is still last every time, want the rotation back")
	}
}

// closingManager is the address of a manager that closes every connection
// at once (shedding handshakes, or refusing), counting them in accepts.
func closingManager(t *testing.T, accepts *atomic.Int32) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			accepts.Add(1)
			c.Close()
		}
	}()
	return l.Addr().String()
}

// tlsManager is the address of a manager that accepts TLS connections
// (a gRPC server with tt's server configuration).
func tlsManager(t *testing.T, tt pkitest.TLS) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(grpc.Creds(credentials.NewTLS(tt.Server)))
	go srv.Serve(l)
	t.Cleanup(srv.Stop)
	return l.Addr().String()
}
