package process

import (
	"context"
	"testing"

	"github.com/curatorproject/curator/provider/providertest"
)

// TestAdoptOrphans: a Provision that crashed after starting the process
// and before recording its pid leaves a record with pid 0 and a running
// node; a Start that crashed alike leaves the record stopped. List and
// Prune find the process by its data dir and record it, instead of
// taking the instance for dead (Prune removing its dir while it runs on,
// holding its address).
func TestAdoptOrphans(t *testing.T) {
	p := newTestProvider(t, t.TempDir(), testAddrs, 0)
	ctx := context.Background()
	// The sleeper takes the data dir as a trailing argument, as an agent
	// takes --data-dir.
	a := providertest.Provision(t, p, sleeperSpec("workers", "{{data-dir}}"))
	b := providertest.Provision(t, p, sleeperSpec("workers", "{{data-dir}}"))
	readReport(t, p, a.ID)
	readReport(t, p, b.ID)
	pidA, pidB := pidOf(t, p, a.ID), pidOf(t, p, b.ID)

	// What each crash leaves: a's record as Provision saved it before the
	// process started; b's as Start did.
	r, err := p.recordLoad(a.ID)
	if err != nil {
		t.Fatal(err)
	}
	r.PID, r.StartTime = 0, 0
	if err := p.recordSave(r); err != nil {
		t.Fatal(err)
	}
	r, err = p.recordLoad(b.ID)
	if err != nil {
		t.Fatal(err)
	}
	r.PID, r.StartTime, r.Stopped = 1<<22+1, 0, true // a pid no process has
	if err := p.recordSave(r); err != nil {
		t.Fatal(err)
	}

	listed := providertest.List(t, p, nil)
	if len(listed) != 2 {
		t.Fatalf("List after the crashes: %+v, want both instances (adopted)", listed)
	}
	if got := pidOf(t, p, a.ID); got != pidA {
		t.Errorf("a's record has pid %d after List, want its process %d", got, pidA)
	}
	if got := pidOf(t, p, b.ID); got != pidB {
		t.Errorf("b's record has pid %d after List, want its process %d", got, pidB)
	}
	if r, _ := p.recordLoad(b.ID); r.Stopped {
		t.Error("b's record still says stopped while its process runs")
	}

	// Prune adopts too, and removes neither.
	r, _ = p.recordLoad(a.ID)
	r.PID, r.StartTime = 0, 0
	if err := p.recordSave(r); err != nil {
		t.Fatal(err)
	}
	if pruned, err := p.Prune(ctx); err != nil || len(pruned) != 0 {
		t.Errorf("Prune = %v, %v; want nothing pruned", pruned, err)
	}
	if got := pidOf(t, p, a.ID); got != pidA {
		t.Errorf("a's record has pid %d after Prune, want %d", got, pidA)
	}

	// Once the process is gone, the instance is dead as before.
	if err := p.Destroy(ctx, b.ID); err != nil {
		t.Fatal(err)
	}
	if listed := providertest.List(t, p, nil); len(listed) != 1 || listed[0].ID != a.ID {
		t.Errorf("List after destroying b: %+v", listed)
	}
}
