package decide

import "testing"

func TestDecideCrash(t *testing.T) {
	const (
		open, refused, silent = ProbeOpen, ProbeRefused, ProbeSilent
	)
	for _, tc := range []struct {
		name          string
		grpc, etcd    ProbeResult
		before, lease bool
		newer         bool
		want          CrashDecision
	}{
		{"alive", open, open, false, true, false, CrashNone},
		{"gRPC restarting in a live process", refused, open, true, true, false, CrashNone},
		{"etcd port refused alone", open, refused, true, true, false, CrashNone},
		{"silent (frozen, cut off): the lease bounds it", silent, silent, true, true, false, CrashNone},
		{"one port silent, one refused", silent, refused, true, true, false, CrashNone},
		{"both refuse once: look again", refused, refused, false, true, false, CrashConfirm},
		{"both refuse twice: revoke", refused, refused, true, true, false, CrashRevoke},
		{"no lease known: nothing to revoke", refused, refused, true, false, false, CrashNone},
		{"a past incarnation's key, the node restarted", open, open, false, true, true, CrashRevoke},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Crash(tc.grpc, tc.etcd, tc.before, tc.lease, tc.newer); got != tc.want {
				t.Errorf("decideCrash(%v, %v, %v, %v) = %v, want %v", tc.grpc, tc.etcd, tc.before, tc.lease, got, tc.want)
			}
		})
	}
}
