package process

import (
	"bytes"
	"fmt"
	"os"
	"slices"
	"strconv"
)

// procStat reads the state and start time of pid from /proc/<pid>/stat.
func procStat(pid int) (state byte, start uint64, err error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, 0, err
	}
	// "pid (comm) state ppid ...": comm may hold spaces and parentheses,
	// so the fields start after the last ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, 0, fmt.Errorf("/proc/%d/stat: no ')'", pid)
	}
	f := bytes.Fields(b[i+1:])
	// f[0] is field 3 (state); field 22 (starttime) is f[19].
	if len(f) < 20 || len(f[0]) != 1 {
		return 0, 0, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f))
	}
	start, err = strconv.ParseUint(string(f[19]), 10, 64)
	if err != nil {
		return 0, 0, fmt.Errorf("/proc/%d/stat: starttime: %w", pid, err)
	}
	return f[0][0], start, nil
}

// startTime is what record.StartTime holds for pid; 0 if it cannot be read.
func startTime(pid int) uint64 {
	_, start, err := procStat(pid)
	if err != nil {
		return 0
	}
	return start
}

// sameProcess says whether pid is still the process that started at start
// (0: unknown, taken on trust) and has not exited.
func sameProcess(pid int, start uint64) bool {
	state, got, err := procStat(pid)
	if err != nil {
		return false
	}
	if state == 'Z' || state == 'X' {
		return false
	}
	return start == 0 || got == start
}

// processesWithArgs finds, in one look at /proc, the live processes that
// have one of args as one of their arguments (by /proc/<pid>/cmdline),
// with their start times, by that argument. A zombie (its command line is
// empty) is never one.
func processesWithArgs(args []string) map[string][]proc {
	if len(args) == 0 {
		return nil
	}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	want := make(map[string]bool, len(args))
	for _, a := range args {
		want[a] = true
	}
	found := map[string][]proc{}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmdline, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil {
			continue
		}
		var hits []string
		for _, a := range bytes.Split(cmdline, []byte{0}) {
			if want[string(a)] && !slices.Contains(hits, string(a)) {
				hits = append(hits, string(a))
			}
		}
		if len(hits) == 0 {
			continue
		}
		state, start, err := procStat(pid)
		if err != nil || state == 'Z' || state == 'X' {
			continue
		}
		for _, a := range hits {
			found[a] = append(found[a], proc{pid: pid, start: start})
		}
	}
	return found
}
