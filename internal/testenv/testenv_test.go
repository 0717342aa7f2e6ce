package testenv

import (
	"errors"
	"net"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestMain(m *testing.M) {
	os.Exit(CheckLeaks(m.Run()))
}

func TestLoopback(t *testing.T) {
	l := NewLoopback(60, 2)
	var got []string
	for range 256 {
		got = append(got, l.Next(t))
	}
	want := []string{"127.0.60.1", "127.0.60.2", "127.0.61.1", "127.0.61.2"}
	if diff := cmp.Diff(want, []string{got[0], got[1], got[254], got[255]}); diff != "" {
		t.Errorf("addresses (-want +got):\n%s", diff)
	}
}

func TestFreePortsAndOccupy(t *testing.T) {
	p := FreePorts(t, "127.0.0.1", 4)
	for i := range 4 {
		Occupy(t, net.JoinHostPort("127.0.0.1", strconv.Itoa(p+i)))
	}
	if portsFree("127.0.0.1", p, 1) {
		t.Errorf("port %d is free while occupied", p)
	}
}

func TestEventually(t *testing.T) {
	start := time.Now()
	n := 0
	Eventually(t, 10*time.Second, "the third call", func() error {
		if n++; n < 3 {
			return errors.New("not yet")
		}
		return nil
	})
	if d := time.Since(start); d > time.Second {
		t.Errorf("three checks took %v", d)
	}
}

func TestDirNames(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(dir+"/a", nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"a"}, DirNames(t, dir)); diff != "" {
		t.Errorf("DirNames (-want +got):\n%s", diff)
	}
	if got := DirNames(t, dir+"/none"); got != nil {
		t.Errorf("DirNames of a missing dir = %v, want nil", got)
	}
}
