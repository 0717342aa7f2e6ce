package providertest

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/curatorproject/curator/internal/testenv"
	"github.com/curatorproject/curator/provider"
)

// Harness is what Contract needs of the provider under test.
type Harness struct {
	// New returns a handle on the provider under test. Each call returns
	// a new one on the same machines, as a new leader makes its own.
	New func(t *testing.T) provider.Provider
	// Spec is the spec of a machine that runs until it is destroyed (a
	// minute at least), with labels.
	Spec func(labels map[string]string) provider.Spec
	// Capacity is how many machines the provider can hold at once: at
	// least 2; the concurrency check makes up to 4.
	Capacity int
	// Orphan, if the provider's Provision can be interrupted after the
	// machine is made (a crash of its caller, of the plugin), leaves a
	// machine of spec as that leaves it, and returns its ID.
	Orphan func(t *testing.T, p provider.Provider, spec provider.Spec) string
	// Domains, for a provider of failure domains, are two or more of its
	// domains, each with room for a machine; nil for a provider of
	// none.
	Domains []string
}

// contractRun numbers the clusters of the checks, so that each check's
// machines carry labels of their own.
var contractRun atomic.Int64

// Contract checks the provider.Provider contract on h's provider: the
// rules every provider meets, whatever its machines are.
//
//   - Provision makes a new machine at each call: a spec names no machine
//     (the machines of a group have identical specs), so the same spec
//     twice makes two, with distinct IDs. What makes a call safe to
//     repeat is List: the caller counts the machines with their labels
//     before it provisions.
//   - List returns exactly the machines whose labels include the
//     selector's, with the labels they were made with, to any handle (a
//     new leader's).
//   - Destroy of a machine that is gone succeeds.
//   - A machine whose Provision was interrupted after it was made is
//     listed by its labels, and destroyed like any other (Orphan).
//   - Calls may come at the same time.
//   - A provider of failure domains (Harness.Domains) makes a machine in
//     the domain its spec names, and Provision and List (a new handle's)
//     say that domain; a spec of a domain it does not have is refused,
//     and nothing is made.
func Contract(t *testing.T, h Harness) {
	t.Helper()
	if h.Capacity < 2 {
		t.Fatalf("Harness.Capacity %d: the contract needs 2 machines at least", h.Capacity)
	}
	t.Run("ProvisionListDestroy", func(t *testing.T) {
		p, labels := h.New(t), contractLabels(t, h, "workers")
		start := time.Now()
		in := Provision(t, p, h.Spec(labels))
		if in.ID == "" {
			t.Fatalf("Provision made a machine with no ID: %+v", in)
		}
		if diff := cmp.Diff(labels, in.Labels); diff != "" {
			t.Errorf("Provision: labels (-want +got):\n%s", diff)
		}
		CheckCreated(t, in, start)
		listed := List(t, p, labels)
		if len(listed) != 1 || listed[0].ID != in.ID || !maps.Equal(listed[0].Labels, labels) {
			t.Fatalf("List(%v) = %+v, want the machine %s", labels, listed, in.ID)
		}
		if in.Address != "" && listed[0].Address != in.Address {
			t.Errorf("List says machine %s is at %q, Provision said %q", in.ID, listed[0].Address, in.Address)
		}
		CheckCreated(t, listed[0], start)
		destroy(t, p, in.ID)
		if listed := List(t, p, labels); len(listed) != 0 {
			t.Errorf("List after Destroy = %+v, want none", listed)
		}
	})
	t.Run("SameSpecTwice", func(t *testing.T) {
		p, labels := h.New(t), contractLabels(t, h, "workers")
		a := Provision(t, p, h.Spec(labels))
		b := Provision(t, p, h.Spec(labels))
		if a.ID == b.ID {
			t.Fatalf("the same spec provisioned twice made one machine %s: want two", a.ID)
		}
		if got := ids(List(t, p, labels)); !slices.Equal(got, sorted(a.ID, b.ID)) {
			t.Errorf("List = %v, want both %v", got, sorted(a.ID, b.ID))
		}
	})
	t.Run("DestroyGone", func(t *testing.T) {
		p, labels := h.New(t), contractLabels(t, h, "workers")
		in := Provision(t, p, h.Spec(labels))
		destroy(t, p, in.ID)
		if err := p.Destroy(context.Background(), in.ID); err != nil {
			t.Errorf("Destroy of machine %s, destroyed already: %v; want success", in.ID, err)
		}
		// By another handle too (a new leader's, which never saw it).
		if err := h.New(t).Destroy(context.Background(), in.ID); err != nil {
			t.Errorf("Destroy of machine %s, destroyed already, by a new handle: %v", in.ID, err)
		}
	})
	t.Run("FoundByNewHandle", func(t *testing.T) {
		p, labels := h.New(t), contractLabels(t, h, "workers")
		in := Provision(t, p, h.Spec(labels))
		// A leader that dies once Provision returned, before it noted
		// anything: the next finds the machine by its labels.
		next := h.New(t)
		if got := ids(List(t, next, labels)); !slices.Equal(got, []string{in.ID}) {
			t.Fatalf("a new handle lists %v, want the machine %s", got, in.ID)
		}
		destroy(t, next, in.ID)
		if listed := List(t, p, labels); len(listed) != 0 {
			t.Errorf("the first handle lists %+v after the new one destroyed it", listed)
		}
	})
	t.Run("Orphan", func(t *testing.T) {
		if h.Orphan == nil {
			t.Skip("the provider's Provision has no window between making a machine and returning it")
		}
		p, labels := h.New(t), contractLabels(t, h, "workers")
		id := h.Orphan(t, p, h.Spec(labels))
		var listed []provider.Instance
		testenv.Eventually(t, 30*time.Second, "the interrupted provision's machine listed", func() error {
			var err error
			listed, err = p.List(context.Background(), labels)
			if err != nil {
				return err
			}
			if !slices.Equal(ids(listed), []string{id}) {
				return fmt.Errorf("List = %v, want %s", ids(listed), id)
			}
			return nil
		})
		destroy(t, p, id)
		if listed := List(t, p, labels); len(listed) != 0 {
			t.Errorf("List after destroying the orphan = %+v", listed)
		}
	})
	t.Run("LabelSelection", func(t *testing.T) {
		p := h.New(t)
		a := contractLabels(t, h, "a")
		b := maps.Clone(a)
		b[provider.LabelGroup] = "b"
		ina := Provision(t, p, h.Spec(a))
		inb := Provision(t, p, h.Spec(b))
		cluster := a[provider.LabelCluster]
		for _, tc := range []struct {
			name     string
			selector map[string]string
			want     []string
		}{
			{"the cluster", map[string]string{provider.LabelCluster: cluster}, sorted(ina.ID, inb.ID)},
			{"group a", map[string]string{provider.LabelCluster: cluster, provider.LabelGroup: "a"}, []string{ina.ID}},
			{"every label of b", b, []string{inb.ID}},
			{"group c", map[string]string{provider.LabelCluster: cluster, provider.LabelGroup: "c"}, nil},
			{"another cluster", map[string]string{provider.LabelCluster: cluster + "-other", provider.LabelGroup: "a"}, nil},
			{"a label none has", map[string]string{provider.LabelCluster: cluster, "contract.absent": "x"}, nil},
		} {
			if got := ids(List(t, p, tc.selector)); !slices.Equal(got, tc.want) {
				t.Errorf("%s: List(%v) = %v, want %v", tc.name, tc.selector, got, tc.want)
			}
		}
	})
	t.Run("Concurrent", func(t *testing.T) {
		p, labels := h.New(t), contractLabels(t, h, "workers")
		n := min(h.Capacity, 4)
		made := make([]provider.Instance, n)
		var wg sync.WaitGroup
		errs := make(chan error, 2*n)
		for i := range n {
			wg.Go(func() {
				var err error
				if made[i], err = p.Provision(context.Background(), h.Spec(labels)); err != nil {
					errs <- fmt.Errorf("provision %d: %w", i, err)
				}
			})
			wg.Go(func() {
				if _, err := p.List(context.Background(), labels); err != nil {
					errs <- fmt.Errorf("list beside provision %d: %w", i, err)
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
		if t.Failed() {
			return
		}
		var want []string
		for _, in := range made {
			want = append(want, in.ID)
		}
		slices.Sort(want)
		if len(slices.Compact(slices.Clone(want))) != n {
			t.Fatalf("%d Provisions at once made %v: want %d distinct machines", n, want, n)
		}
		if got := ids(List(t, p, labels)); !slices.Equal(got, want) {
			t.Fatalf("List = %v, want %v", got, want)
		}
		errs = make(chan error, 2*n)
		for _, in := range made {
			wg.Go(func() {
				if err := p.Destroy(context.Background(), in.ID); err != nil {
					errs <- fmt.Errorf("destroy %s: %w", in.ID, err)
				}
			})
			wg.Go(func() {
				if err := p.Destroy(context.Background(), in.ID); err != nil {
					errs <- fmt.Errorf("destroy %s a second time at once: %w", in.ID, err)
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
		if listed := List(t, p, labels); len(listed) != 0 {
			t.Errorf("List after the Destroys = %v", ids(listed))
		}
	})
	t.Run("Domains", func(t *testing.T) {
		if len(h.Domains) == 0 {
			t.Skip("the provider has no failure domains (Harness.Domains)")
		}
		p, labels := h.New(t), contractLabels(t, h, "workers")
		want := map[string]string{} // machine: domain
		for _, d := range h.Domains {
			spec := h.Spec(labels)
			spec.Domain = d
			in := Provision(t, p, spec)
			if in.Domain != d {
				t.Errorf("Provision in domain %s made machine %s in domain %q", d, in.ID, in.Domain)
			}
			want[in.ID] = d
		}
		got := map[string]string{}
		for _, in := range List(t, h.New(t), labels) {
			got[in.ID] = in.Domain
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("a new handle lists the machines in domains (-want +got):\n%s", diff)
		}
		spec := h.Spec(labels)
		spec.Domain = "contract-no-such-domain"
		if in, err := p.Provision(context.Background(), spec); err == nil {
			t.Errorf("Provision in domain %s, not one of the provider's: made %+v, want an error", spec.Domain, in)
		}
		if got := ids(List(t, p, labels)); !slices.Equal(got, slices.Sorted(maps.Keys(want))) {
			t.Errorf("List after a refused Provision = %v, want %v", got, slices.Sorted(maps.Keys(want)))
		}
	})
}

// contractLabels are the labels of a check's machines: a cluster of its
// own, group, a config SHA. The check's machines left when it ends are
// destroyed.
func contractLabels(t *testing.T, h Harness, group string) map[string]string {
	t.Helper()
	cluster := fmt.Sprintf("contract-%d", contractRun.Add(1))
	t.Cleanup(func() {
		p := h.New(t)
		insts, err := p.List(context.Background(), map[string]string{provider.LabelCluster: cluster})
		if err != nil {
			t.Errorf("cleanup: %v", err)
		}
		for _, in := range insts {
			if err := p.Destroy(context.Background(), in.ID); err != nil {
				t.Errorf("cleanup: %v", err)
			}
		}
	})
	return map[string]string{provider.LabelCluster: cluster, provider.LabelGroup: group, provider.LabelConfigSHA: "sha1"}
}

func destroy(t *testing.T, p provider.Provider, id string) {
	t.Helper()
	if err := p.Destroy(context.Background(), id); err != nil {
		t.Fatalf("Destroy(%s): %v", id, err)
	}
}

func ids(insts []provider.Instance) []string {
	var out []string
	for _, in := range insts {
		out = append(out, in.ID)
	}
	slices.Sort(out)
	return out
}

func sorted(ids ...string) []string {
	slices.Sort(ids)
	return ids
}
