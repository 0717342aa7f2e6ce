package curator

import (
	"testing"
	"time"
)

func TestRetiredEtcdCerts(t *testing.T) {
	if got := retiredEtcdCerts([][]byte{[]byte("not a certificate")}, time.Now()); len(got) != 1 {
		t.Errorf("an unreadable certificate was dropped: %d kept, want 1 (revoked rather than lost)", len(got))
	}
}
