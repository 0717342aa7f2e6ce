//go:build faults

package faults

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Fault points, compiled in with -tags faults. CURATOR_FAULT names the
// points (comma-separated) at which the process exits at once with status
// 99, as if the machine died there: no deferred function runs, nothing is
// flushed, the election lease is left to expire.
var faultPoints = func() map[string]bool {
	m := map[string]bool{}
	for _, p := range strings.Split(os.Getenv(Env), ",") {
		if p = strings.TrimSpace(p); p != "" {
			m[p] = true
		}
	}
	return m
}()

// delays and skew are read from the environment once; a bad value ends
// the process before it does anything, saying why.
var (
	delays = mustEnv(ParseDelays(os.Getenv(DelayEnv)))
	skew   = mustEnv(ParseClockSkew(os.Getenv(ClockSkewEnv)))
	// delaySaid: each delayed point says so once, on stderr.
	delaySaid sync.Map
)

func mustEnv[T any](v T, err error) T {
	if err != nil {
		fmt.Fprintf(os.Stderr, "curator: %v\n", err)
		os.Exit(2)
	}
	return v
}

// Enabled says whether this binary was built with fault points.
const Enabled = true

// Point is a point at which the process dies at once, if CURATOR_FAULT
// names it, or sleeps, if CURATOR_FAULT_DELAY gives it a delay.
func Point(name string) {
	if faultPoints[name] {
		fmt.Fprintf(os.Stderr, "CURATOR_FAULT: dying at %s\n", name)
		os.Exit(99)
	}
	delay(name)
}

// fileDelays are the delays of the process's file in DelayDirEnv.
var fileDelays struct {
	sync.Mutex
	dir     string
	readAt  time.Time
	content string
	delays  map[string]time.Duration
}

func init() { fileDelays.dir = os.Getenv(DelayDirEnv) }

// delayOf is the delay of the point name: its file's (DelayDirEnv),
// else CURATOR_FAULT_DELAY's.
func delayOf(name string) (time.Duration, bool) {
	if fileDelays.dir != "" {
		fd := &fileDelays
		fd.Lock()
		if time.Since(fd.readAt) >= DelayDirPoll {
			fd.readAt = time.Now()
			path := filepath.Join(fd.dir, strconv.Itoa(os.Getpid()))
			b, _ := os.ReadFile(path) // no file: no delay
			if content := strings.TrimSpace(string(b)); content != fd.content {
				fd.content = content
				d, err := ParseDelays(content)
				if err != nil {
					fmt.Fprintf(os.Stderr, "curator: %s: %v: no delays from it\n", path, err)
				}
				fd.delays = d
				delaySaid.Clear() // each arming says what it met
			}
		}
		d, ok := fd.delays[name]
		fd.Unlock()
		if ok {
			return d, true
		}
	}
	d, ok := delays[name]
	return d, ok
}

// delay sleeps for the delay CURATOR_FAULT_DELAY (or the process's file
// in CURATOR_FAULT_DELAY_DIR) gives name, if any.
func delay(name string) {
	d, ok := delayOf(name)
	if !ok {
		return
	}
	if _, said := delaySaid.LoadOrStore(name, true); !said {
		fmt.Fprintf(os.Stderr, "%s: %s delayed %s (said once)\n", DelayEnv, name, d)
	}
	time.Sleep(d)
}

// Armed says whether CURATOR_FAULT names name: for the points that
// change what the process does instead of ending it (ReadStale500ms).
func Armed(name string) bool { return faultPoints[name] }

// Now is the curator's clock: the host's, off by CURATOR_FAULT_CLOCK_SKEW.
func Now() time.Time {
	if skew == 0 {
		return time.Now()
	}
	// Add moves the wall and the monotonic reading alike: two times
	// of this clock differ as the host's do, and a time another process
	// wrote (a record's, a message's: wall clock only) is off by the
	// skew, as it would be on a host whose clock is off.
	return time.Now().Add(skew)
}
