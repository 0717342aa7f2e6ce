package history

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/anishathalye/porcupine"
)

// op is a test's operation: client, key, kind, value (a write's, or a
// read's result), call and return; unknown for a write of unknown
// outcome.
type op struct {
	client    int
	kind      Kind
	value     string
	call, ret int64
	unknown   bool
}

func history(key string, ops ...op) *Recorder {
	r := NewRecorder()
	for _, o := range ops {
		in := Input{Key: key, Kind: o.kind, Call: "test"}
		out := Output{Unknown: o.unknown}
		if o.kind == Write {
			in.Value = o.value
		} else {
			out.Value = o.value
		}
		r.Add(o.client, in, o.call, o.ret, out)
	}
	return r
}

// TestModel checks the register model on small histories: the checker
// must pass what a linearizable register allows and fail a stale read.
func TestModel(t *testing.T) {
	for _, tc := range []struct {
		name string
		ops  []op
		ok   bool
	}{
		{"a read after an acknowledged write sees it", []op{
			{0, Init, "a", 0, 1, false}, {1, Write, "b", 2, 3, false}, {2, Read, "b", 4, 5, false},
		}, true},
		{"a read after an acknowledged write sees the old value (stale)", []op{
			{0, Init, "a", 0, 1, false}, {1, Write, "b", 2, 3, false}, {2, Read, "a", 4, 5, false},
		}, false},
		{"a read concurrent with the write may see either", []op{
			{0, Init, "a", 0, 1, false}, {1, Write, "b", 2, 6, false}, {2, Read, "a", 3, 4, false}, {3, Read, "b", 3, 5, false},
		}, true},
		{"once the new value is read, the old is not read again", []op{
			{0, Init, "a", 0, 1, false}, {1, Write, "b", 2, 9, false}, {2, Read, "b", 3, 4, false}, {3, Read, "a", 5, 6, false},
		}, false},
		{"a write of unknown outcome may take effect late", []op{
			{0, Init, "a", 0, 1, false}, {1, Write, "b", 2, 3, true}, {2, Read, "a", 4, 5, false}, {2, Read, "b", 6, 7, false},
		}, true},
		{"a write of unknown outcome may never take effect", []op{
			{0, Init, "a", 0, 1, false}, {1, Write, "b", 2, 3, true}, {2, Read, "a", 4, 5, false}, {2, Read, "a", 6, 7, false},
		}, true},
		{"a write of unknown outcome takes effect once, not twice", []op{
			{0, Init, "a", 0, 1, false}, {1, Write, "b", 2, 3, true}, {2, Read, "b", 4, 5, false}, {3, Write, "c", 6, 7, false}, {2, Read, "b", 8, 9, false},
		}, false},
		{"a value never written is never read", []op{
			{0, Init, "a", 0, 1, false}, {2, Read, "z", 4, 5, false},
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := history("label/n1", tc.ops...)
			dir := t.TempDir()
			_, _, err := r.Check(dir)
			if (err == nil) != tc.ok {
				t.Fatalf("Check: %v, want ok %v", err, tc.ok)
			}
			if tc.ok {
				return
			}
			path := filepath.Join(dir, VisualizationFile)
			if !strings.Contains(err.Error(), "label/n1") {
				t.Errorf("Check's error does not name the register label/n1: %v", err)
			}
			if !strings.Contains(err.Error(), path) {
				t.Errorf("Check's error does not name the visualisation %s: %v", path, err)
			}
			if b, err := os.ReadFile(path); err != nil || !strings.Contains(string(b), "<html") {
				t.Errorf("visualisation %s: %v, %d bytes, want an HTML page", path, err, len(b))
			}
		})
	}
}

// TestPartitionByKey: a stale read of one key fails the history however
// many other keys are fine, and each key is checked from its own Init.
func TestPartitionByKey(t *testing.T) {
	ops := history("group/a", op{0, Init, "1", 0, 1, false}, op{1, Write, "2", 2, 3, false}).Operations()
	ops = append(ops, history("group/b", op{0, Init, "x", 0, 1, false}, op{2, Read, "x", 4, 5, false}).Operations()...)
	if got := porcupine.CheckOperations(Model, ops); !got {
		t.Fatalf("two keys, each fine: not linearizable")
	}
	stale := history("group/a", op{2, Read, "1", 4, 5, false}).Operations()
	if got := porcupine.CheckOperations(Model, append(ops, stale...)); got {
		t.Fatalf("a stale read of group/a: linearizable, want not")
	}
}

// TestWatchFindingsFail: a watch validator's finding fails the check.
func TestWatchFindingsFail(t *testing.T) {
	r := history("label/n1", op{0, Init, "a", 0, 1, false})
	r.WatchBroken("events: went back")
	if _, _, err := r.Check(t.TempDir()); err == nil || !strings.Contains(err.Error(), "went back") {
		t.Fatalf("Check: %v, want the watch's finding", err)
	}
}
