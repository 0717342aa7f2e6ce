package swarmtest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// What the harness does to the host, and looks for on it: processes,
// namespaces and mounts.

// readPid reads a pidfile.
func readPid(path string) (int, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 1 {
		return 0, fmt.Errorf("pidfile %s holds %q", path, b)
	}
	return pid, nil
}

// signalPid sends SIGTERM ("TERM"), SIGKILL ("KILL"), SIGSTOP ("STOP")
// or SIGCONT ("CONT") to pid; a process that is gone already is no error.
func signalPid(pid int, sig string) error {
	s := map[string]syscall.Signal{"TERM": syscall.SIGTERM, "KILL": syscall.SIGKILL, "STOP": syscall.SIGSTOP, "CONT": syscall.SIGCONT}[sig]
	if s == 0 {
		return fmt.Errorf("unknown signal %q", sig)
	}
	if err := syscall.Kill(pid, s); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("kill -%s %d: %w", sig, pid, err)
	}
	return nil
}

// netnsPids lists the processes in network namespace name.
func netnsPids(name string) ([]int, error) {
	out, err := exec.Command("ip", "netns", "pids", name).CombinedOutput()
	if err != nil {
		if _, serr := os.Stat(filepath.Join(netnsDir, name)); os.IsNotExist(serr) {
			return nil, nil
		}
		return nil, fmt.Errorf("ip netns pids %s: %v: %s", name, err, strings.TrimSpace(string(out)))
	}
	var pids []int
	for f := range strings.FieldsSeq(string(out)) {
		if pid, err := strconv.Atoi(f); err == nil && pid > 1 && pid != os.Getpid() {
			pids = append(pids, pid)
		}
	}
	return pids, nil
}

// killNetns kills every process in network namespace name, and waits up
// to 10 s until none is left.
func killNetns(name string) error {
	deadline := time.Now().Add(10 * time.Second)
	for {
		pids, err := netnsPids(name)
		if err != nil {
			return err
		}
		if len(pids) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("processes %v of namespace %s outlived SIGKILL", pids, name)
		}
		for _, pid := range pids {
			_ = signalPid(pid, "KILL")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// deleteNetns kills what runs in network namespace name and deletes it;
// one that does not exist is deleted already.
func deleteNetns(name string) error {
	if _, err := os.Stat(filepath.Join(netnsDir, name)); os.IsNotExist(err) {
		return nil
	}
	if err := killNetns(name); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return ip(ctx, "netns", "delete", name)
}

// mountPoints lists the host's mount points (this process's mount
// namespace), from /proc/self/mountinfo.
func mountPoints() ([]string, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) > 4 {
			out = append(out, unescapeMount(fields[4]))
		}
	}
	return out, sc.Err()
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// unmountUnder unmounts every mount point under dir, deepest first. The
// engines mount in private namespaces, so there should be none: this is
// for a dockerd that got out somehow.
func unmountUnder(dir string) error {
	mps, err := mountPoints()
	if err != nil {
		return err
	}
	var under []string
	for _, mp := range mps {
		if mp == dir || strings.HasPrefix(mp, dir+"/") {
			under = append(under, mp)
		}
	}
	slices.SortFunc(under, func(a, b string) int { return len(b) - len(a) })
	var errs []error
	for _, mp := range under {
		if err := syscall.Unmount(mp, syscall.MNT_DETACH); err != nil && !errors.Is(err, syscall.EINVAL) {
			errs = append(errs, fmt.Errorf("unmount %s: %w", mp, err))
		}
	}
	return errors.Join(errs...)
}

// mountsMentioning lists the mount points under dir or of a namespace
// named with prefix.
func mountsMentioning(dir, prefix string) []string {
	mps, _ := mountPoints()
	var out []string
	for _, mp := range mps {
		if strings.HasPrefix(mp, dir) || strings.HasPrefix(mp, filepath.Join(netnsDir, prefix)) ||
			strings.HasPrefix(mp, filepath.Join("/run/netns", prefix)) {
			out = append(out, mp)
		}
	}
	return out
}

// processesMentioning lists the processes whose command line mentions s,
// as "PID: command line".
func processesMentioning(s string) []string {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || len(b) == 0 {
			continue
		}
		cmdline := strings.ReplaceAll(strings.TrimRight(string(b), "\x00"), "\x00", " ")
		if strings.Contains(cmdline, s) {
			out = append(out, fmt.Sprintf("%d: %s", pid, cmdline))
		}
	}
	return out
}
