// Command sleeper stands in for `curator agent` in the process provider's
// tests: it writes what it was started with (its arguments and the
// SLEEPER_ENV variable) to the file -out names, then runs until SIGTERM
// (or, with -ignore-term, until SIGKILL). It exits on its own after a
// minute, so that a failed test leaves nothing running for long.
package main

import (
	"encoding/json"
	"flag"
	"log"
	"os"
	"os/signal"
	"syscall"
	"time"
)

func main() {
	out := flag.String("out", "", "file to write the report to")
	flag.String("listen", "", "ignored; reported in the args")
	ignoreTerm := flag.Bool("ignore-term", false, "ignore SIGTERM")
	flag.Parse()

	term := make(chan os.Signal, 1)
	if *ignoreTerm {
		signal.Ignore(syscall.SIGTERM)
	} else {
		signal.Notify(term, syscall.SIGTERM)
	}
	b, err := json.Marshal(map[string]any{"args": os.Args[1:], "env": os.Getenv("SLEEPER_ENV")})
	if err != nil {
		log.Fatal(err)
	}
	// Write and rename, so the test never reads half a report.
	if err := os.WriteFile(*out+".tmp", b, 0o600); err != nil {
		log.Fatal(err)
	}
	if err := os.Rename(*out+".tmp", *out); err != nil {
		log.Fatal(err)
	}
	select {
	case <-term:
	case <-time.After(time.Minute):
	}
}
