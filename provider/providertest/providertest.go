// Package providertest holds what the tests of every provider.Provider
// share: calls that fail the test on an error, and the comparison of
// instances.
package providertest

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/curatorproject/curator/provider"
)

// Provision provisions spec on p, failing the test on an error.
func Provision(t testing.TB, p provider.Provider, spec provider.Spec) provider.Instance {
	t.Helper()
	in, err := p.Provision(context.Background(), spec)
	if err != nil {
		t.Fatalf("Provision: %v", err)
	}
	return in
}

// List lists p's instances matching selector, failing the test on an
// error.
func List(t testing.TB, p provider.Provider, selector map[string]string) []provider.Instance {
	t.Helper()
	insts, err := p.List(context.Background(), selector)
	if err != nil {
		t.Fatalf("List(%v): %v", selector, err)
	}
	return insts
}

// IgnoreCreated leaves Instance.Created out of comparisons: CheckCreated
// checks it.
var IgnoreCreated = cmpopts.IgnoreFields(provider.Instance{}, "Created")

// CheckCreated checks that an instance says it was made about when start
// was (the providers' clocks count in seconds at worst).
func CheckCreated(t testing.TB, in provider.Instance, start time.Time) {
	t.Helper()
	if in.Created.Before(start.Add(-2*time.Second)) || in.Created.After(time.Now().Add(2*time.Second)) {
		t.Errorf("instance %s: Created %v, want about %v", in.ID, in.Created, start)
	}
}
