package main

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// A dir's lock names its holder's pid, keeps a second dev out (in this
// process too) saying who holds it, and is free again once closed.
func TestLockDevDir(t *testing.T) {
	dir := t.TempDir()
	lock, err := lockDevDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, devLockFile)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	pid := strconv.Itoa(os.Getpid())
	if strings.TrimSpace(string(data)) != pid {
		t.Errorf("%s holds %q, want this process's pid %s", devLockFile, data, pid)
	}

	_, err = lockDevDir(dir)
	want := dir + " is in use by another curator dev: process " + pid + " holds " + path
	if !errors.Is(err, errDevBusy) || !strings.HasPrefix(err.Error(), want) {
		t.Fatalf("second lock: %v, want %q", err, want)
	}

	if err := lock.Close(); err != nil {
		t.Fatal(err)
	}
	again, err := lockDevDir(dir)
	if err != nil {
		t.Fatalf("lock after the first was closed: %v", err)
	}
	again.Close()
}
