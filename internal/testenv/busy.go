package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
)

// BusyEnv names how many busy neighbours a package's tests run beside
// (BusyNeighbours): CURATOR_TEST_BUSY=10 go test ./test/ runs the
// end-to-end tests on a host whose load average is about ten, as a
// shared CI machine's can be.
const BusyEnv = "CURATOR_TEST_BUSY"

// BusyNeighbours starts as many processes that burn a core each as
// BusyEnv says (none when it is unset), and returns what stops them. It
// is for TestMain, around m.Run: the curators, agents and etcd members
// the tests start then share the host's cores with them.
func BusyNeighbours() (stop func(), err error) {
	v := os.Getenv(BusyEnv)
	if v == "" {
		return func() {}, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return nil, fmt.Errorf("%s=%q: want a number of busy processes", BusyEnv, v)
	}
	stop, err = Busy(n)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(os.Stderr, "testenv: %d busy neighbours (%s)\n", n, BusyEnv)
	return stop, nil
}

// Busy starts n processes that burn a core each, and returns what stops
// them (and waits for them): a host starved of CPU for as long as a test
// wants (the chaos suite's starve step).
func Busy(n int) (stop func(), err error) {
	var burners []*exec.Cmd
	stop = func() {
		for _, c := range burners {
			_ = c.Process.Kill()
			_ = c.Wait()
		}
	}
	for range n {
		c := exec.Command("sh", "-c", "while :; do :; done")
		if err := c.Start(); err != nil {
			stop()
			return nil, fmt.Errorf("start a busy neighbour: %w", err)
		}
		burners = append(burners, c)
	}
	return stop, nil
}
