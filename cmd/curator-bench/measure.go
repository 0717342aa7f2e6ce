package main

import (
	"fmt"
	"math"
	"math/bits"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/procfs"
)

// latencyHist is a lock-free log-linear histogram of durations in
// microseconds: exact below 64 µs, then 32 buckets per power of two (within
// about 3 %). Thousands of streams record into one without contention, and
// it takes 15 KiB whatever the number of samples.
type latencyHist struct {
	counts [histBuckets]atomic.Uint64
	total  atomic.Uint64
	max    atomic.Uint64
}

const (
	histSubBits = 5
	histSub     = 1 << histSubBits // buckets per power of two
	histLinear  = 2 * histSub      // values below are exact
	histBuckets = histLinear + histSub*(64-histSubBits-1)
)

func histIndex(us uint64) int {
	if us < histLinear {
		return int(us)
	}
	shift := bits.Len64(us) - (histSubBits + 1)
	top := us >> shift // in [histSub, 2*histSub)
	return histLinear + (shift-1)*histSub + int(top-histSub)
}

// histMid is the middle of bucket i, in microseconds.
func histMid(i int) float64 {
	if i < histLinear {
		return float64(i)
	}
	k := i - histLinear
	shift := k/histSub + 1
	top := uint64(k%histSub + histSub)
	lo, hi := top<<shift, (top+1)<<shift
	return float64(lo+hi-1) / 2
}

func (h *latencyHist) record(d time.Duration) {
	us := uint64(max(d, 0) / time.Microsecond)
	h.counts[histIndex(us)].Add(1)
	h.total.Add(1)
	for {
		m := h.max.Load()
		if us <= m || h.max.CompareAndSwap(m, us) {
			return
		}
	}
}

// quantile returns the q-quantile (0 < q <= 1) by nearest rank, or 0 with
// no samples.
func (h *latencyHist) quantile(q float64) time.Duration {
	n := h.total.Load()
	if n == 0 {
		return 0
	}
	rank := uint64(math.Ceil(q * float64(n)))
	var seen uint64
	for i := range h.counts {
		seen += h.counts[i].Load()
		if seen >= rank {
			return min(time.Duration(histMid(i)*float64(time.Microsecond)), h.maximum())
		}
	}
	return h.maximum()
}

func (h *latencyHist) maximum() time.Duration {
	return time.Duration(h.max.Load()) * time.Microsecond
}

// samples keeps every duration, for the few hundred or thousand of a join
// wave or of list rounds, where exact percentiles are cheap.
type samples struct {
	mu sync.Mutex
	d  []time.Duration
}

func (s *samples) add(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.d = append(s.d, d)
}

// quantile is the nearest-rank q-quantile, or 0 with no samples.
func (s *samples) quantile(q float64) time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return quantile(s.d, q)
}

func quantile(d []time.Duration, q float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	sorted := slices.Clone(d)
	slices.Sort(sorted)
	rank := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[min(max(rank, 0), len(sorted)-1)]
}

// userHZ is the unit of the CPU times in /proc/PID/stat: USER_HZ, which
// Linux fixes at 100 for user space on every architecture it supports.
// procfs gives the times in these ticks; counting them keeps the
// durations exact.
const userHZ = 100

// procCPU is the CPU time (user + system, all threads) process pid has
// used, from /proc/PID/stat.
func procCPU(pid int) (time.Duration, error) {
	p, err := procfs.NewProc(pid)
	if err != nil {
		return 0, err
	}
	st, err := p.Stat()
	if err != nil {
		return 0, err
	}
	return time.Duration(st.UTime+st.STime) * time.Second / userHZ, nil
}

// procRSS is the resident set of process pid in bytes (VmRSS, from
// /proc/PID/status).
func procRSS(pid int) (uint64, error) {
	p, err := procfs.NewProc(pid)
	if err != nil {
		return 0, err
	}
	st, err := p.NewStatus()
	if err != nil {
		return 0, err
	}
	if st.VmRSS == 0 {
		return 0, fmt.Errorf("/proc/%d/status: no VmRSS", pid)
	}
	return st.VmRSS, nil
}

// hostCPU returns the host's busy and total CPU time in seconds, from the
// first line of /proc/stat. Over a window, busy/total is how loaded the
// whole machine was (the bench shares it with whatever else runs).
func hostCPU() (busy, total float64, err error) {
	fs, err := procfs.NewDefaultFS()
	if err != nil {
		return 0, 0, err
	}
	st, err := fs.Stat()
	if err != nil {
		return 0, 0, err
	}
	c := st.CPUTotal
	// idle and iowait are not busy; guest times are already counted in
	// user, but so few hosts run guests that the double count does not
	// matter here.
	busy = c.User + c.Nice + c.System + c.IRQ + c.SoftIRQ + c.Steal + c.Guest + c.GuestNice
	return busy, busy + c.Idle + c.Iowait, nil
}

// cpuWindow measures the CPU time of processes and of the host over a
// window: start it, then call pct for each process at the end.
type cpuWindow struct {
	start               time.Time
	cpu                 map[int]time.Duration
	hostBusy, hostTotal float64
}

func startCPUWindow(pids ...int) *cpuWindow {
	w := &cpuWindow{start: time.Now(), cpu: map[int]time.Duration{}}
	for _, pid := range pids {
		if c, err := procCPU(pid); err == nil {
			w.cpu[pid] = c
		}
	}
	w.hostBusy, w.hostTotal, _ = hostCPU()
	return w
}

// pct is the CPU pid used since the window started, in percent of one
// core, or -1 if it cannot be read (the process died).
func (w *cpuWindow) pct(pid int) float64 {
	c0, ok := w.cpu[pid]
	if !ok {
		return -1
	}
	c1, err := procCPU(pid)
	if err != nil {
		return -1
	}
	return 100 * (c1 - c0).Seconds() / time.Since(w.start).Seconds()
}

// used is the CPU time pid used since the window started, and false if it
// cannot be read (the process died).
func (w *cpuWindow) used(pid int) (time.Duration, bool) {
	c0, ok := w.cpu[pid]
	if !ok {
		return 0, false
	}
	c1, err := procCPU(pid)
	if err != nil {
		return 0, false
	}
	return c1 - c0, true
}

// hostPct is how busy the whole host was since the window started, in
// percent of all its cores.
func (w *cpuWindow) hostPct() float64 {
	busy, total, err := hostCPU()
	if err != nil || total <= w.hostTotal {
		return -1
	}
	return 100 * (busy - w.hostBusy) / (total - w.hostTotal)
}

// ms is d in milliseconds, rounded to the microsecond, for the JSON line.
func ms(d time.Duration) float64 { return round3(float64(d) / float64(time.Millisecond)) }

// secs is d in seconds, rounded to the millisecond.
func secs(d time.Duration) float64 { return round3(d.Seconds()) }

func round3(x float64) float64 { return math.Round(x*1000) / 1000 }

func mib(b uint64) float64 { return round3(float64(b) / (1 << 20)) }
