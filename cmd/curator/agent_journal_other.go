//go:build !linux

package main

// underJournal: journald is Linux's.
func underJournal() bool { return false }
