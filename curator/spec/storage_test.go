package spec

import (
	"errors"
	"strings"
	"testing"
)

// TestStorageReadable: the managers read a storage version once the
// lowest of them runs its first release or later; a development build is
// taken to read this release's; a version this release does not know is
// read by none it can vouch for.
func TestStorageReadable(t *testing.T) {
	for _, tc := range []struct {
		v      uint32
		lowest string
		want   bool
	}{
		{1, "v0.0.0-dev+0102c366cac2", true},
		{1, "v0.1.0", true},
		{0, "v0.1.0", true},
		{1, "dev", true},
		{1, "", true},
		{2, "v9.0.0", false},
	} {
		if got := StorageReadable(tc.v, tc.lowest); got != tc.want {
			t.Errorf("StorageReadable(%d, %q) = %v, want %v", tc.v, tc.lowest, got, tc.want)
		}
	}
}

// TestCheckStorageRead: an upgrade to a release that reads the records'
// version or later goes; one that reads less is refused, saying both
// versions and what the records hold.
func TestCheckStorageRead(t *testing.T) {
	for _, tc := range []struct {
		reads, at uint32
		ok        bool
	}{{1, 0, true}, {1, 1, true}, {2, 1, true}, {1, 2, false}} {
		err := CheckStorageRead("v0.0.9", tc.reads, tc.at)
		if (err == nil) != tc.ok {
			t.Errorf("CheckStorageRead(reads %d, at %d) = %v, want ok %v", tc.reads, tc.at, err, tc.ok)
		}
		if err != nil && (!errors.Is(err, ErrPrecondition) || !strings.Contains(err.Error(), "up to storage version 1") || !strings.Contains(err.Error(), "to version 2")) {
			t.Errorf("the refusal %q: want a precondition naming both versions", err)
		}
	}
}
