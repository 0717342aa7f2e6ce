package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/curatorproject/curator/internal/testenv"
)

// TestDevQuorumLost: two of a dev cluster's three managers killed. The
// survivor's /healthz says the quorum is lost with dev's advice (`curator
// dev --dir DIR --force-new-cluster`), not `agent run` by hand. Once they
// are gone for good (their dirs removed), `curator dev --dir DIR` says
// at once that it waits for a quorum, and fails within a minute, naming
// the lost quorum and --force-new-cluster; before, it printed nothing for
// two minutes and then a timeout that named neither. Its words count
// right: "3 managers and 1 worker", "workers: 1 node".
func TestDevQuorumLost(t *testing.T) {
	parallel(t) // its own addresses and dirs
	const addresses = "127.0.143.10-127.0.143.30"
	d := startDevCluster(t, binary, nil, addresses, 3, 1)
	log, err := os.ReadFile(filepath.Join(d.dir, "dev.log"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"starting 3 managers and 1 worker\n", "committed group workers: 1 node\n"} {
		if !strings.Contains(string(log), want) {
			t.Errorf("dev's output has no %q:\n%s", want, log)
		}
	}

	nodes, err := nodeLs(t, d.config)
	if err != nil {
		t.Fatal(err)
	}
	var survivor nodeJSON
	var killed []nodeJSON
	for _, n := range nodes {
		switch {
		case n.Group != "managers":
		case survivor.Name == "":
			survivor = n
		default:
			killed = append(killed, n)
		}
	}
	if len(killed) != 2 {
		t.Fatalf("managers: %+v, want three", nodes)
	}
	for _, n := range killed {
		killInstance(t, n.InstanceID)
	}
	healthz := fmt.Sprintf("http://%s:%d/healthz", strings.Split(survivor.Address, ":")[0], port+3)
	wantAdvice := "`curator dev --dir " + d.dir + " --force-new-cluster`"
	testenv.Eventually(t, 30*time.Second, "the survivor's /healthz says the quorum is lost, with dev's advice", func() error {
		h, err := getHealthz(healthz)
		if err != nil {
			return err
		}
		if h.Quorum != "lost" || !strings.Contains(h.Message, wantAdvice) || strings.Contains(h.Message, "agent run") {
			return fmt.Errorf("%+v", h)
		}
		return nil
	})

	// Gone for good: dev stopped, their dirs removed.
	d.stop()
	for _, n := range killed {
		if err := os.RemoveAll(filepath.Join(d.dir, "instances", n.InstanceID)); err != nil {
			t.Fatal(err)
		}
	}
	began := time.Now()
	_, stderr, err := cliTimeout(t, 2*time.Minute, "dev", "--dir", d.dir)
	took := time.Since(began)
	if err == nil {
		t.Fatalf("dev with one manager of three left: no error; stderr:\n%s", stderr)
	}
	for _, want := range []string{
		"the managers say the quorum is lost: waiting up to",
		"the quorum is still lost",
		"1 of its 3 voters answer",
		"curator dev --dir " + d.dir + " --force-new-cluster",
	} {
		if !strings.Contains(stderr, want) {
			t.Errorf("dev with one manager of three left says no %q:\n%s", want, stderr)
		}
	}
	if took > time.Minute {
		t.Errorf("dev took %s to say the quorum is lost, want under a minute", took.Round(time.Second))
	}
}

// quorumHealth is the part of /healthz that says about the quorum.
type quorumHealth struct {
	Quorum, Message string
}

func getHealthz(url string) (quorumHealth, error) {
	var h quorumHealth
	c := http.Client{Timeout: 3 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return h, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return h, err
	}
	return h, json.Unmarshal(body, &h)
}
