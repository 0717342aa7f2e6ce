package consensus

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"testing"
)

func TestVerifySnapshot(t *testing.T) {
	db := bytes.Repeat([]byte{7}, 4096)
	sum := sha256.Sum256(db)
	whole := append(append([]byte{}, db...), sum[:]...)
	flipped := append([]byte{}, whole...)
	flipped[100] ^= 1
	for _, tc := range []struct {
		name string
		data []byte
		ok   bool
	}{
		{"whole", whole, true},
		{"empty", nil, false},
		{"truncated", whole[:len(whole)-1], false},
		{"cut at a page", whole[:2048+sha256.Size], false},
		{"a byte changed", flipped, false},
		{"no checksum", db, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := verifySnapshot(bytes.NewReader(tc.data), int64(len(tc.data)))
			if tc.ok != (err == nil) {
				t.Fatalf("verifySnapshot: %v, want ok=%v", err, tc.ok)
			}
			if err != nil && !errors.Is(err, ErrBadSnapshot) {
				t.Errorf("error %v is not ErrBadSnapshot", err)
			}
		})
	}
}
