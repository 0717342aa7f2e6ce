package netfault

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// dialEnv makes the test binary, run again, a child that dials the
// address each line of its stdin names and says whether it connected.
const dialEnv = "NETFAULT_TEST_DIALER"

func TestMain(m *testing.M) {
	if os.Getenv(dialEnv) != "" {
		sc := bufio.NewScanner(os.Stdin)
		var held []net.Conn // "hold ADDR": dialed and kept open
		for sc.Scan() {
			addr, hold := strings.CutPrefix(sc.Text(), "hold ")
			c, err := net.DialTimeout("tcp", addr, time.Second)
			if err != nil {
				fmt.Println("no:", err)
				continue
			}
			if hold {
				held = append(held, c)
			} else {
				c.Close()
			}
			_ = len(held) // kept open until the process ends
			fmt.Println("yes")
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// dialer is a child process that dials on demand.
type dialer struct {
	cmd *exec.Cmd
	in  *os.File
	out *bufio.Scanner
}

func startDialer(t *testing.T) *dialer {
	t.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), dialEnv+"=1")
	inR, inW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdin = inR
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	inR.Close()
	t.Cleanup(func() { inW.Close(); _ = cmd.Wait() })
	return &dialer{cmd: cmd, in: inW, out: bufio.NewScanner(out)}
}

func (d *dialer) dial(t *testing.T, addr string) string {
	t.Helper()
	fmt.Fprintln(d.in, addr)
	if !d.out.Scan() {
		t.Fatalf("the dialer said nothing: %v", d.out.Err())
	}
	return d.out.Text()
}

// A process moved into a cgroup of its own is cut off by address: what
// it sends to B is dropped (silently: a timeout, not a refusal), what
// others send to it too, and its traffic to itself passes; healed, all
// passes again, and the drops were counted.
func TestCgroupPartition(t *testing.T) {
	if err := Available(); err != nil {
		t.Skip(err)
	}
	const a, b = "127.0.44.201", "127.0.44.202"
	var lns []net.Listener
	for _, ip := range []string{a, b} {
		ln, err := net.Listen("tcp", ip+":0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				c.Close()
			}
		}()
		lns = append(lns, ln)
	}
	aAddr, bAddr := lns[0].Addr().String(), lns[1].Addr().String()

	tab, _, err := New("curator_netfault_test_", "cg")
	if err != nil {
		t.Skip(err)
	}
	defer tab.Delete()
	path := fmt.Sprintf("curator-netfault-test-%d", os.Getpid())
	cg, err := NewCgroup(path + "/a")
	if err != nil {
		t.Skip(err)
	}
	defer RemoveCgroup(path)
	defer cg.Close()

	inside, outside := startDialer(t), startDialer(t)
	if err := cg.Add(inside.cmd.Process.Pid); err != nil {
		t.Fatal(err)
	}
	for _, step := range []error{
		tab.Drop(cg.FromCgroup()+" ip daddr 127.0.44.200-127.0.44.210 ip daddr != "+a, "a -> the others"),
		tab.Pass(cg.FromCgroup(), "a to itself"),
		tab.Drop(ToIP(a), "the others -> a"),
	} {
		if step != nil {
			t.Fatal(step)
		}
	}
	for _, c := range []struct {
		who  *dialer
		name string
		to   string
		want string
	}{
		{inside, "a to b", bAddr, "i/o timeout"},
		{inside, "a to itself", aAddr, "yes"},
		{outside, "another to a", aAddr, "i/o timeout"},
		{outside, "another to b", bAddr, "yes"},
	} {
		if got := c.who.dial(t, c.to); !strings.Contains(got, c.want) {
			t.Errorf("%s while cut: %s, want %q", c.name, got, c.want)
		}
	}
	dropped, total, err := tab.Heal()
	if err != nil {
		t.Fatal(err)
	}
	if dropped["a -> the others"] == 0 || dropped["the others -> a"] == 0 {
		t.Errorf("drops counted %v (%d in all), want some by each rule", dropped, total)
	}
	for _, c := range []struct {
		who *dialer
		to  string
	}{{inside, bAddr}, {outside, aAddr}} {
		if got := c.who.dial(t, c.to); got != "yes" {
			t.Errorf("healed, a dial to %s: %s", c.to, got)
		}
	}
	if err := cg.Close(); err != nil {
		t.Error(err)
	}
	if own, err := cgroupOf(inside.cmd.Process.Pid); err != nil || strings.Contains(own, path) {
		t.Errorf("the process is still in %s (%v)", own, err)
	}
}

// A process's open connections are aborted, but those spare keeps: the
// peer sees its connection end.
func TestAbortConnections(t *testing.T) {
	if err := Available(); err != nil {
		t.Skip(err)
	}
	var accepted []chan net.Conn
	var addrs []string
	for _, ip := range []string{"127.0.44.203", "127.0.44.204"} {
		ln, err := net.Listen("tcp", ip+":0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		ch := make(chan net.Conn, 1)
		go func() {
			if c, err := ln.Accept(); err == nil {
				ch <- c
			}
		}()
		accepted, addrs = append(accepted, ch), append(addrs, ln.Addr().String())
	}
	d := startDialer(t)
	for _, a := range addrs {
		if got := d.dial(t, "hold "+a); got != "yes" {
			t.Fatalf("hold %s: %s", a, got)
		}
	}
	n, err := AbortConnections(d.cmd.Process.Pid, func(_, remote netip.AddrPort) bool { return remote.Addr().String() == "127.0.44.204" })
	if err != nil || n != 1 {
		t.Fatalf("aborted %d, %v; want the one connection to 127.0.44.203", n, err)
	}
	for i, want := range []bool{true, false} {
		c := <-accepted[i]
		defer c.Close()
		_ = c.SetReadDeadline(time.Now().Add(time.Second))
		_, err := c.Read(make([]byte, 1))
		var ne net.Error
		ended := err != nil && !(errors.As(err, &ne) && ne.Timeout())
		if ended != want {
			t.Errorf("connection to %s: read %v, want it ended: %v", addrs[i], err, want)
		}
	}
}

// Close moves every process of the cgroup back, those that started in
// it too (a child of one moved in), and removes it.
func TestCgroupCloseTakesEveryProcess(t *testing.T) {
	if err := Available(); err != nil {
		t.Skip(err)
	}
	path := fmt.Sprintf("curator-netfault-test-%d", os.Getpid())
	cg, err := NewCgroup(path + "/close")
	if err != nil {
		t.Skip(err)
	}
	defer RemoveCgroup(path)
	var pids []int
	for range 2 {
		cmd := exec.Command("sleep", "30")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
		pids = append(pids, cmd.Process.Pid)
	}
	if err := cg.Add(pids[0]); err != nil {
		t.Fatal(err)
	}
	// The second as if it had started inside: not through Add.
	if err := os.WriteFile(filepath.Join(cg.dir, "cgroup.procs"), []byte(strconv.Itoa(pids[1])), 0); err != nil {
		t.Fatal(err)
	}
	if err := cg.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	for _, pid := range pids {
		if own, err := cgroupOf(pid); err != nil || strings.Contains(own, path) {
			t.Errorf("process %d is still in %s (%v)", pid, own, err)
		}
	}
}
