package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// TestDevBinaryCopy: dev's binary is copied into DIR, executable; the
// source may then go (as go run's build does) and the copy stays; a new
// binary replaces the copy; dev started from the copy keeps it.
func TestDevBinaryCopy(t *testing.T) {
	src := filepath.Join(t.TempDir(), "curator")
	if err := os.WriteFile(src, []byte("v1"), 0o755); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	got, err := devBinaryCopy(src, dir)
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(dir, "bin", "curator"); got != want {
		t.Fatalf("copy at %s, want %s", got, want)
	}
	os.Remove(src)
	if b, err := os.ReadFile(got); err != nil || !bytes.Equal(b, []byte("v1")) {
		t.Fatalf("the copy after its source went: %q, %v", b, err)
	}
	if fi, err := os.Stat(got); err != nil || fi.Mode().Perm()&0o100 == 0 {
		t.Fatalf("the copy is not executable: %v %v", fi.Mode(), err)
	}
	if err := os.WriteFile(src, []byte("v2"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := devBinaryCopy(src, dir); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(got); !bytes.Equal(b, []byte("v2")) {
		t.Fatalf("the copy was not replaced by the new binary: %q", b)
	}
	if again, err := devBinaryCopy(got, dir); err != nil || again != got {
		t.Fatalf("dev from its own copy: %s, %v", again, err)
	}
	if b, _ := os.ReadFile(got); !bytes.Equal(b, []byte("v2")) {
		t.Fatalf("dev from its copy changed it: %q", b)
	}
	if entries, _ := os.ReadDir(filepath.Dir(got)); len(entries) != 1 {
		t.Errorf("left behind in bin/: %v", entries)
	}
}
