package atomicfile

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// The file has exactly the mode asked for, whatever the umask and whatever
// mode the file it replaces had, and no temporary file is left beside it.
func TestWriteMode(t *testing.T) {
	old := syscall.Umask(0o077)
	defer syscall.Umask(old)
	dir := t.TempDir()
	path := filepath.Join(dir, "ca.crt")
	if err := os.WriteFile(path, []byte("old"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		data string
		mode os.FileMode
	}{
		{"public", 0o644}, // wider than the umask lets through
		{"secret", 0o600}, // narrower than the file before
	} {
		if err := Write(path, []byte(tc.data), tc.mode); err != nil {
			t.Fatal(err)
		}
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != tc.mode {
			t.Errorf("after writing %q: mode %v, want %v", tc.data, fi.Mode().Perm(), tc.mode)
		}
		if got, err := os.ReadFile(path); err != nil || string(got) != tc.data {
			t.Errorf("read %q, %v; want %q", got, err, tc.data)
		}
		entries, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		if len(entries) != 1 {
			t.Errorf("after writing %q the dir holds %d entries, want only the file", tc.data, len(entries))
		}
	}
}

// A write that cannot be made leaves the old file as it was and nothing
// else.
func TestWriteFailureKeepsOld(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "state.json")
	if err := Write(path, []byte("old"), 0o600); err != nil {
		t.Fatal(err)
	}
	// A directory where the file's new name would go cannot be renamed
	// over, so the rename fails after the data was written.
	blocked := filepath.Join(dir, "blocked")
	if err := os.MkdirAll(filepath.Join(blocked, "x"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := Write(blocked, []byte("new"), 0o600); err == nil {
		t.Fatal("replacing a non-empty directory: no error")
	}
	if got, err := os.ReadFile(path); err != nil || string(got) != "old" {
		t.Errorf("read %q, %v; want the old file", got, err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 2 {
		t.Errorf("the dir holds %d entries, want the file and the directory: a temporary file was left", len(entries))
	}
}
