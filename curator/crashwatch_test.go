package curator

import "testing"

func TestDecideCrash(t *testing.T) {
	const (
		open, refused, silent = probeOpen, probeRefused, probeSilent
	)
	for _, tc := range []struct {
		name          string
		grpc, etcd    probeResult
		before, lease bool
		newer         bool
		want          crashDecision
	}{
		{"alive", open, open, false, true, false, crashNone},
		{"gRPC restarting in a live process", refused, open, true, true, false, crashNone},
		{"etcd port refused alone", open, refused, true, true, false, crashNone},
		{"silent (frozen, cut off): the lease bounds it", silent, silent, true, true, false, crashNone},
		{"one port silent, one refused", silent, refused, true, true, false, crashNone},
		{"both refuse once: look again", refused, refused, false, true, false, crashConfirm},
		{"both refuse twice: revoke", refused, refused, true, true, false, crashRevoke},
		{"no lease known: nothing to revoke", refused, refused, true, false, false, crashNone},
		{"a past incarnation's key, the node restarted", open, open, false, true, true, crashRevoke},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := decideCrash(tc.grpc, tc.etcd, tc.before, tc.lease, tc.newer); got != tc.want {
				t.Errorf("decideCrash(%v, %v, %v, %v) = %v, want %v", tc.grpc, tc.etcd, tc.before, tc.lease, got, tc.want)
			}
		})
	}
}
