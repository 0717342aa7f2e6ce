package localcluster

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/curatorproject/curator/internal/testenv"
)

// The bring-up itself runs against real processes in the end-to-end tests
// (test/) and `curator dev`; here, what a Config may be.

func TestMain(m *testing.M) {
	os.Exit(testenv.CheckLeaks(m.Run()))
}

func TestConfigValidate(t *testing.T) {
	start := func(context.Context, Launch) (Process, error) { return nil, nil }
	m := func(name string) Node { return Node{Name: name, Manager: true} }
	w := func(name string) Node { return Node{Name: name} }
	for _, tc := range []struct {
		name    string
		cfg     Config
		wantErr string
	}{
		{"managers then workers", Config{Nodes: []Node{m("m1"), m("m2"), w("w1")}, Start: start}, ""},
		{"one manager", Config{Nodes: []Node{m("m1")}, Start: start}, ""},
		{"no nodes", Config{Start: start}, "no nodes"},
		{"no starter", Config{Nodes: []Node{m("m1")}}, "no starter"},
		{"worker first", Config{Nodes: []Node{w("w1"), m("m1")}, Start: start}, "after a worker"},
		{"only a worker", Config{Nodes: []Node{w("w1")}, Start: start}, "must be a manager"},
		{"twice", Config{Nodes: []Node{m("m1"), w("m1")}, Start: start}, "m1 twice"},
		{"no name", Config{Nodes: []Node{m("")}, Start: start}, "no name"},
		{"negative poll", Config{Nodes: []Node{m("m1")}, Start: start, Poll: -1}, "negative"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.Validate()
			switch {
			case tc.wantErr == "" && err != nil:
				t.Errorf("Validate: %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Errorf("Validate = %v, want an error containing %q", err, tc.wantErr)
			}
			if tc.wantErr != "" {
				if _, err := Up(context.Background(), tc.cfg); err == nil {
					t.Error("Up of an invalid config started")
				}
			}
		})
	}
}
