package curator

import (
	"strconv"
	"sync"
	"testing"
)

// TestRegisterSharesClusterReads: Register reads the cluster record (the
// join tokens) through the leader's shared reads, each a read that
// started after the call (store.ClusterReads, whose tests hold that
// promise; TestRegister's rotated token, its effect): joins at once
// share reads instead of making one each.
func TestRegisterSharesClusterReads(t *testing.T) {
	c := newTestCluster(t)
	svc := c.startLeader()
	admin, anon := c.dialFirst()
	token := c.token(admin, "worker")
	before := svc.clusterReads.Reads()
	c.register(anon, token, "w-one")
	if got := svc.clusterReads.Reads() - before; got != 1 {
		t.Fatalf("one Register made %d shared reads of the cluster record, want 1", got)
	}
	const joins = 16
	before = svc.clusterReads.Reads()
	var wg sync.WaitGroup
	for i := range joins {
		wg.Go(func() { c.register(anon, token, "w"+strconv.Itoa(i)) })
	}
	wg.Wait()
	got := svc.clusterReads.Reads() - before
	if got < 1 || got > joins {
		t.Errorf("%d Registers at once made %d reads of the cluster record, want 1 to %d", joins, got, joins)
	}
	t.Logf("%d Registers at once made %d reads of the cluster record", joins, got)
}
