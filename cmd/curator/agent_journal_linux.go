package main

import (
	"os"
	"strconv"
	"strings"
	"syscall"
)

// underJournal says whether stderr is journald's stream (JOURNAL_STREAM is
// "DEV:INODE" of it), so log lines need no time of their own.
func underJournal() bool {
	dev, ino, ok := strings.Cut(os.Getenv("JOURNAL_STREAM"), ":")
	if !ok {
		return false
	}
	var st syscall.Stat_t
	if err := syscall.Fstat(int(os.Stderr.Fd()), &st); err != nil {
		return false
	}
	return strconv.FormatUint(st.Dev, 10) == dev && strconv.FormatUint(st.Ino, 10) == ino
}
