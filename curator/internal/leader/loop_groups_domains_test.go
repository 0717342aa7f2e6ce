package leader

import (
	"testing"
	"time"
)

// TestDarkDomainsSeen: domain_hold counts from when the loop first saw a
// domain dark, for as long as it stays dark; one back and dark again
// counts anew.
func TestDarkDomainsSeen(t *testing.T) {
	var d darkDomains
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	if got := d.seen("w", map[string]string{"b": "x"}, t0); !got["b"].Equal(t0) {
		t.Fatalf("first seen: %v", got)
	}
	if got := d.seen("w", map[string]string{"b": "x", "c": "y"}, t0.Add(time.Minute)); !got["b"].Equal(t0) || !got["c"].Equal(t0.Add(time.Minute)) {
		t.Errorf("still dark: %v, want b since t0, c since t0+1m", got)
	}
	if got := d.seen("other", map[string]string{"b": "x"}, t0.Add(2*time.Minute)); !got["b"].Equal(t0.Add(2 * time.Minute)) {
		t.Errorf("another group's count: %v, want its own", got)
	}
	d.seen("w", nil, t0.Add(3*time.Minute))
	if got := d.seen("w", map[string]string{"b": "x"}, t0.Add(4*time.Minute)); !got["b"].Equal(t0.Add(4 * time.Minute)) {
		t.Errorf("dark again after it came back: %v, want counted anew", got)
	}
}
