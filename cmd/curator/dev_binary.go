package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// devBinaryName is where dev keeps a copy of its binary in DIR.
const devBinaryName = "bin/curator"

// devBinaryCopy copies binary self into dir (DIR/bin/curator) and returns
// the copy's path: dev's machines, and the groups' process provider in the
// leader, start that copy. A binary `go run` built lives in the build
// cache and is deleted when go run exits (dev running on under nohup, or a
// later `curator dev` on DIR): with the copy, a killed worker is still
// replaced. It is written beside and renamed into place, so a machine
// running the old copy keeps running it. A dev started from the copy
// itself keeps it.
func devBinaryCopy(self, dir string) (string, error) {
	dst := filepath.Join(dir, devBinaryName)
	if same, err := sameFile(self, dst); err != nil || same {
		return dst, err
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return "", fmt.Errorf("keep a copy of this binary in %s: %w", dir, err)
	}
	in, err := os.Open(self)
	if err != nil {
		return "", fmt.Errorf("keep a copy of this binary in %s: %w", dir, err)
	}
	defer in.Close()
	tmp, err := os.CreateTemp(filepath.Dir(dst), ".curator-")
	if err != nil {
		return "", fmt.Errorf("keep a copy of this binary in %s: %w", dir, err)
	}
	defer os.Remove(tmp.Name()) // once renamed, there is nothing to remove
	_, err = io.Copy(tmp, in)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp.Name(), 0o755)
	}
	if err == nil {
		err = os.Rename(tmp.Name(), dst)
	}
	if err != nil {
		return "", fmt.Errorf("keep a copy of this binary in %s: %w", dir, err)
	}
	return dst, nil
}

// sameFile says whether a and b are the same file (b may not exist).
func sameFile(a, b string) (bool, error) {
	sb, err := os.Stat(b)
	if os.IsNotExist(err) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	sa, err := os.Stat(a)
	if err != nil {
		return false, err
	}
	return os.SameFile(sa, sb), nil
}
