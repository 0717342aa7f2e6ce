// Package history records what clients of the management API see, each
// through a manager of its own, while a cluster runs (and faults strike
// it), and checks the history against the API's consistency promise
// (docs/consistency.md): with porcupine, the linearizability checker of
// etcd's robustness tests, against a model of registers partitioned by
// key, and the watches against validators. See README.md here.
package history

import (
	"fmt"
	"sort"
	"strings"

	"github.com/anishathalye/porcupine"
)

// Kind is what an operation does to its register.
type Kind uint8

const (
	// Init is the register's value read before the history starts
	// (nothing writes it meanwhile): the state the checks start from.
	Init Kind = iota
	// Read returns the register's value.
	Read
	// Write sets it.
	Write
)

// The registers, by the prefix of their key: each is one value the API
// promises to read back linearizably.
const (
	// KeyGroup is a group's config SHA: CommitGroup writes it; group
	// describe (GetGroup) and rollout status (GetRollout's target) read
	// it.
	KeyGroup = "group/"
	// KeyLabel is a node's label LabelKey: UpdateNode writes it; node ls
	// (ListNodes) and node inspect (GetNode) read it.
	KeyLabel = "label/"
	// KeyAvailability is a node's availability, written and read as
	// KeyLabel.
	KeyAvailability = "availability/"
	// KeyRole is whether a node has the consensus role ("consensus" or
	// "-"): PromoteNode and DemoteNode write it, as KeyLabel reads it.
	KeyRole = "role/"
)

// Input is an operation on one register.
type Input struct {
	Key   string
	Kind  Kind
	Value string // what a write writes
	// Call is the API call, for the visualisation: "UpdateNode via
	// 127.0.185.2:7000".
	Call string
}

// Output is what an operation returned: a read's value. Unknown marks a
// write whose outcome the client could not learn (it timed out, or the
// manager went away): it may have taken effect at any time after its
// call, or never.
type Output struct {
	Value   string
	Unknown bool
}

// unset is a register's state before its Init: only a write or an Init
// may follow.
const unset = "\x00unset"

// Model is the API's promise for one register, partitioned by key: a
// linearizable register. A write with an unknown outcome is given the
// history's end as its return (Recorder.Operations), so that it may be
// placed anywhere after its call, the end meaning never; as porcupine
// checks etcd's histories.
var Model = porcupine.Model{
	Partition: func(ops []porcupine.Operation) [][]porcupine.Operation {
		byKey := map[string][]porcupine.Operation{}
		for _, op := range ops {
			k := op.Input.(Input).Key
			byKey[k] = append(byKey[k], op)
		}
		keys := make([]string, 0, len(byKey))
		for k := range byKey {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		out := make([][]porcupine.Operation, 0, len(keys))
		for _, k := range keys {
			out = append(out, byKey[k])
		}
		return out
	},
	Init: func() any { return unset },
	Step: func(state, input, output any) (bool, any) {
		s, in, out := state.(string), input.(Input), output.(Output)
		switch in.Kind {
		case Init:
			return s == unset, out.Value
		case Write:
			return true, in.Value
		default:
			return s != unset && s == out.Value, s
		}
	},
	DescribeOperation: func(input, output any) string {
		in, out := input.(Input), output.(Output)
		switch in.Kind {
		case Init:
			return fmt.Sprintf("%s init %s", in.Key, show(out.Value))
		case Write:
			unknown := ""
			if out.Unknown {
				unknown = " (outcome unknown)"
			}
			return fmt.Sprintf("%s := %s%s  [%s]", in.Key, show(in.Value), unknown, in.Call)
		default:
			return fmt.Sprintf("%s -> %s  [%s]", in.Key, show(out.Value), in.Call)
		}
	},
	DescribeState: func(state any) string { return show(state.(string)) },
}

// show is a register's value as the visualisation shows it: a SHA
// shortened.
func show(v string) string {
	switch {
	case v == unset:
		return "(unset)"
	case v == "":
		return `""`
	case len(v) == 64 && strings.Trim(v, "0123456789abcdef") == "":
		return v[:12]
	}
	return v
}
