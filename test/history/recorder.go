package history

import (
	"cmp"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/anishathalye/porcupine"
)

// Recorder collects the operations of a history, each with its
// invocation and return times on the monotonic clock (time.Since of the
// recorder's start). It is safe for concurrent use.
type Recorder struct {
	start time.Time

	mu      sync.Mutex
	ops     []porcupine.Operation
	unknown []int // indexes of ops whose outcome is unknown
	watches []string
}

// NewRecorder starts a history now.
func NewRecorder() *Recorder { return &Recorder{start: time.Now()} }

// Now is the history's clock: nanoseconds since its start, monotonic.
func (r *Recorder) Now() int64 { return int64(time.Since(r.start)) }

// Add records an operation of client (an index, one per manager) that
// was invoked at call and returned at ret.
func (r *Recorder) Add(client int, in Input, call, ret int64, out Output) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if out.Unknown {
		r.unknown = append(r.unknown, len(r.ops))
	}
	r.ops = append(r.ops, porcupine.Operation{ClientId: client, Input: in, Call: call, Output: out, Return: ret})
}

// WatchBroken records a watch validator's finding.
func (r *Recorder) WatchBroken(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.watches = append(r.watches, fmt.Sprintf(format, args...))
}

// Operations is the history so far, its writes of unknown outcome
// returning at its end (now): they may have taken effect at any time
// after their call, or never.
func (r *Recorder) Operations() []porcupine.Operation {
	r.mu.Lock()
	defer r.mu.Unlock()
	ops := make([]porcupine.Operation, len(r.ops))
	copy(ops, r.ops)
	end := r.Now()
	for _, i := range r.unknown {
		ops[i].Return = max(end, ops[i].Call)
	}
	return ops
}

// Summary counts a history's operations.
type Summary struct {
	Operations, Reads, Writes, Unknown, Keys int
	// KindWrites counts the writes by register kind (KeyGroup, ...).
	KindWrites map[string]int
}

func (s Summary) String() string {
	var kinds []string
	for _, k := range []string{KeyGroup, KeyLabel, KeyAvailability, KeyRole} {
		if n := s.KindWrites[k]; n > 0 {
			kinds = append(kinds, fmt.Sprintf("%d %s", n, strings.TrimSuffix(k, "/")))
		}
	}
	return fmt.Sprintf("%d operations on %d registers: %d reads, %d writes (%s; %d of unknown outcome)", s.Operations, s.Keys, s.Reads, s.Writes, strings.Join(kinds, ", "), s.Unknown)
}

// Summarize counts ops.
func Summarize(ops []porcupine.Operation) Summary {
	s := Summary{Operations: len(ops), KindWrites: map[string]int{}}
	keys := map[string]bool{}
	for _, op := range ops {
		in := op.Input.(Input)
		keys[in.Key] = true
		switch in.Kind {
		case Read:
			s.Reads++
		case Write:
			s.Writes++
			s.KindWrites[in.Key[:strings.Index(in.Key, "/")+1]]++
			if op.Output.(Output).Unknown {
				s.Unknown++
			}
		}
	}
	s.Keys = len(keys)
	return s
}

// CheckTimeout bounds porcupine's search; past it the check says
// nothing (Unknown), which Check reports as a pass with a note.
const CheckTimeout = 2 * time.Minute

// VisualizationFile is the name of the history's visualisation that a
// failed check writes in its directory.
const VisualizationFile = "history.html"

// Check checks the history recorded: the operations against Model and
// the watches' findings. On a violation it writes porcupine's
// visualisation of the history to dir/history.html and says so in the
// error. note says what it could not decide (the search timed out).
func (r *Recorder) Check(dir string) (sum Summary, note string, err error) {
	ops := r.Operations()
	sum = Summarize(ops)
	res, info := porcupine.CheckOperationsVerbose(Model, ops, CheckTimeout)
	r.mu.Lock()
	watches := append([]string(nil), r.watches...)
	r.mu.Unlock()
	var problems []string
	switch res {
	case porcupine.Illegal:
		path := filepath.Join(dir, VisualizationFile)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return sum, "", err
		}
		if verr := porcupine.VisualizePath(Model, info, path); verr != nil {
			path = fmt.Sprintf("(not written: %v)", verr)
		}
		keys, parts := illegalKeys(ops)
		text := filepath.Join(dir, HistoryFile)
		if werr := os.WriteFile(text, []byte(describe(parts)), 0o644); werr != nil {
			text = fmt.Sprintf("(not written: %v)", werr)
		}
		problems = append(problems, fmt.Sprintf("the history is not linearizable (%s): registers %s: see %s (those registers' calls as text: %s)", sum, strings.Join(keys, ", "), path, text))
	case porcupine.Unknown:
		note = fmt.Sprintf("the linearizability check of %s timed out after %s: undecided", sum, CheckTimeout)
	}
	for _, w := range watches {
		problems = append(problems, "watch: "+w)
	}
	if len(problems) > 0 {
		return sum, note, errors.New(strings.Join(problems, "\n"))
	}
	return sum, note, nil
}

// illegalKeys names the registers whose own history is not
// linearizable, each with its count of operations, and returns their
// operations.
func illegalKeys(ops []porcupine.Operation) ([]string, [][]porcupine.Operation) {
	var keys []string
	var parts [][]porcupine.Operation
	for _, part := range Model.Partition(ops) {
		if porcupine.CheckOperationsTimeout(Model, part, CheckTimeout/10) == porcupine.Illegal {
			keys = append(keys, fmt.Sprintf("%s (%d operations)", part[0].Input.(Input).Key, len(part)))
			parts = append(parts, part)
		}
	}
	return keys, parts
}

// HistoryFile is the name of the text a failed check writes beside the
// visualisation: the calls on the registers not linearizable, in the
// order they were invoked, with their times.
const HistoryFile = "history.txt"

// describe writes parts' operations one a line: invoke and return (ms
// since the history's start), the client and the operation.
func describe(parts [][]porcupine.Operation) string {
	var b strings.Builder
	for _, part := range parts {
		part = slices.Clone(part)
		slices.SortFunc(part, func(a, b porcupine.Operation) int { return cmp.Compare(a.Call, b.Call) })
		fmt.Fprintf(&b, "register %s\n", part[0].Input.(Input).Key)
		for _, op := range part {
			ret := fmt.Sprintf("%10.3f", float64(op.Return)/1e6)
			if op.Output.(Output).Unknown {
				ret = "   unknown"
			}
			fmt.Fprintf(&b, "%10.3f %s  client %d  %s\n", float64(op.Call)/1e6, ret, op.ClientId, Model.DescribeOperation(op.Input, op.Output))
		}
	}
	return b.String()
}
