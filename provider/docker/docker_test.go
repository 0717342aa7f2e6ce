package docker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/google/go-cmp/cmp"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/network"
	"github.com/moby/moby/client"
	"go.uber.org/zap/zaptest"

	"github.com/curatorproject/curator/internal/testenv"
	"github.com/curatorproject/curator/provider"
	"github.com/curatorproject/curator/provider/providertest"
)

// testDeadline bounds every wait for a condition.
const testDeadline = 30 * time.Second

// networkSeq numbers this run's networks.
var networkSeq atomic.Int32

// newTestProvider returns a Provider on a network of its own, made here
// with a subnet no other network has, labelled for cleanup; edit may change
// the config first. Its containers and network go when the test ends.
func newTestProvider(t *testing.T, edit func(*Config)) *Provider {
	t.Helper()
	requireDocker(t)
	name := fmt.Sprintf("curator-test-%s-%d", runID, networkSeq.Add(1))
	var p *Provider
	for try := 0; ; try++ {
		cfg := Config{
			Network:     name,
			Subnet:      fmt.Sprintf("172.30.%d.0/24", 100+rand.IntN(150)),
			Image:       testImage,
			StopTimeout: 5 * time.Second,
			Logger:      zaptest.NewLogger(t),
		}
		if edit != nil {
			edit(&cfg)
		}
		var err error
		if p, err = New(cfg); err != nil {
			t.Fatalf("New: %v", err)
		}
		subnet, _ := p.cfg.subnet()
		_, err = p.docker.NetworkCreate(context.Background(), name, client.NetworkCreateOptions{
			Driver: "bridge",
			IPAM:   &network.IPAM{Config: []network.IPAMConfig{{Subnet: subnet, Gateway: gateway(subnet)}}},
			Labels: map[string]string{testLabel: runID, labelNetwork: name},
		})
		if err == nil {
			break
		}
		p.Close()
		if try == 10 || !strings.Contains(err.Error(), "overlap") {
			t.Fatalf("create network %s: %v", name, err)
		}
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := removeNetwork(ctx, p.docker, name); err != nil {
			t.Errorf("cleanup: %v", err)
		}
		p.Close()
	})
	return p
}

// initSpec starts the first node of a new cluster.
func initSpec(group string) provider.Spec {
	return provider.Spec{
		Labels: map[string]string{provider.LabelCluster: "c1", provider.LabelGroup: group, provider.LabelConfigSHA: "sha1"},
		Args:   []string{"agent", "init", "--listen", "{{address}}", "--data-dir", "{{data-dir}}", "--election-ttl", "1s"},
	}
}

// waitFor polls cond until it holds, failing the test past the deadline
// with the last reason cond gave.
func waitFor(t *testing.T, what string, cond func() error) {
	t.Helper()
	testenv.Eventually(t, testDeadline, what, cond)
}

// healthz is the part of a node's /healthz the tests read.
type healthz struct {
	NodeID    string `json:"node_id"`
	Consensus string `json:"consensus"`
}

// getHealthz asks the node at addr (IP:PORT) for /healthz at PORT+3, from
// the host.
func getHealthz(addr string) (healthz, error) {
	ap, err := netip.ParseAddrPort(addr)
	if err != nil {
		return healthz{}, err
	}
	url := "http://" + net.JoinHostPort(ap.Addr().String(), strconv.Itoa(int(ap.Port())+3)) + "/healthz"
	// The dial has a timeout shorter than the request's, so that no dial
	// outlives the call (goleak would see it).
	dialer := &net.Dialer{Timeout: time.Second}
	c := &http.Client{Timeout: 3 * time.Second, Transport: &http.Transport{DisableKeepAlives: true, DialContext: dialer.DialContext}}
	resp, err := c.Get(url)
	if err != nil {
		return healthz{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return healthz{}, err
	}
	var h healthz
	if err := json.Unmarshal(b, &h); err != nil {
		return h, fmt.Errorf("%s: %s: %w", url, b, err)
	}
	if h.NodeID == "" {
		return h, fmt.Errorf("%s names no node: %s", url, b)
	}
	return h, nil
}

// waitHealthy waits until the node at addr answers /healthz from the host.
func waitHealthy(t *testing.T, addr string) healthz {
	t.Helper()
	var h healthz
	waitFor(t, "/healthz of "+addr, func() (err error) {
		h, err = getHealthz(addr)
		return err
	})
	return h
}

// containerState is the state of container id, "" if it is gone.
func containerState(t *testing.T, p *Provider, id string) container.ContainerState {
	t.Helper()
	c, err := p.docker.ContainerInspect(context.Background(), id, client.ContainerInspectOptions{})
	if cerrdefs.IsNotFound(err) {
		return ""
	}
	if err != nil {
		t.Fatalf("inspect %s: %v", id, err)
	}
	return c.Container.State.Status
}

func TestProvisionListDestroy(t *testing.T) {
	p := newTestProvider(t, nil)
	ctx := context.Background()
	subnet, _ := p.cfg.subnet()

	start := time.Now()
	in := providertest.Provision(t, p, initSpec("managers"))
	wantAddr := netip.AddrPortFrom(gateway(subnet).Next(), DefaultPort).String()
	wantInst := provider.Instance{ID: in.ID, Labels: initSpec("managers").Labels, Address: wantAddr}
	if diff := cmp.Diff(wantInst, in, providertest.IgnoreCreated); diff != "" {
		t.Errorf("Provision (-want +got):\n%s", diff)
	}
	providertest.CheckCreated(t, in, start)
	if err := p.validID(in.ID); err != nil {
		t.Errorf("Provision made ID %q: %v", in.ID, err)
	}
	// The node runs, at its address, reached from the host.
	h := waitHealthy(t, in.Address)
	t.Logf("node %s answers /healthz from the host %v after Provision began (consensus %s)", h.NodeID, time.Since(start).Round(time.Millisecond), h.Consensus)

	// The placeholders were replaced in the container's command.
	c, err := p.docker.ContainerInspect(ctx, in.ID, client.ContainerInspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	wantCmd := []string{"agent", "init", "--listen", wantAddr, "--data-dir", DefaultDataDir, "--election-ttl", "1s"}
	if diff := cmp.Diff(wantCmd, []string(c.Container.Config.Cmd)); diff != "" {
		t.Errorf("container command (-want +got):\n%s", diff)
	}

	for _, tc := range []struct {
		name     string
		selector map[string]string
		want     []provider.Instance
	}{
		{"all", nil, []provider.Instance{wantInst}},
		{"its group", map[string]string{provider.LabelGroup: "managers"}, []provider.Instance{wantInst}},
		{"every label", initSpec("managers").Labels, []provider.Instance{wantInst}},
		{"other group", map[string]string{provider.LabelGroup: "workers"}, nil},
		{"other sha", map[string]string{provider.LabelGroup: "managers", provider.LabelConfigSHA: "sha2"}, nil},
		{"the provider's own labels are not the caller's", map[string]string{labelNetwork: p.cfg.Network}, nil},
		{"nor are the image's", map[string]string{testLabel: runID}, nil},
	} {
		if diff := cmp.Diff(tc.want, providertest.List(t, p, tc.selector), providertest.IgnoreCreated); diff != "" {
			t.Errorf("List %s (-want +got):\n%s", tc.name, diff)
		}
	}

	// A new leader, with a Provider of its own on the network, finds it.
	p2, err := New(p.cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer p2.Close()
	if diff := cmp.Diff([]provider.Instance{wantInst}, providertest.List(t, p2, nil), providertest.IgnoreCreated); diff != "" {
		t.Errorf("List by a new provider (-want +got):\n%s", diff)
	}
	// A provider on another network does not.
	other := newTestProvider(t, nil)
	if got := providertest.List(t, other, nil); len(got) != 0 {
		t.Errorf("List by a provider on another network = %v, want none", got)
	}
	if err := other.Destroy(ctx, in.ID); !errors.Is(err, ErrInvalidID) {
		t.Errorf("Destroy by a provider on another network = %v, want ErrInvalidID", err)
	}

	start = time.Now()
	if err := p2.Destroy(ctx, in.ID); err != nil {
		t.Fatalf("Destroy: %v", err)
	}
	t.Logf("Destroy took %v", time.Since(start).Round(time.Millisecond))
	if s := containerState(t, p, in.ID); s != "" {
		t.Errorf("container after Destroy is %s, want it gone", s)
	}
	if _, err := getHealthz(in.Address); err == nil {
		t.Errorf("the destroyed node still answers at %s", in.Address)
	}
	if got := providertest.List(t, p, nil); len(got) != 0 {
		t.Errorf("List after Destroy = %v, want none", got)
	}
	// Destroy is idempotent, and unknown IDs are destroyed already.
	for _, id := range []string{in.ID, p.cfg.Network + "-00000000"} {
		if err := p.Destroy(ctx, id); err != nil {
			t.Errorf("Destroy(%q) again: %v", id, err)
		}
	}
	for _, id := range []string{"", "..", "other-00000000", p.cfg.Network + "-", p.cfg.Network + "-xyz", p.cfg.Network + "-00000000/x"} {
		if err := p.Destroy(ctx, id); !errors.Is(err, ErrInvalidID) {
			t.Errorf("Destroy(%q) = %v, want ErrInvalidID", id, err)
		}
	}
	noImage := newTestProvider(t, func(c *Config) { c.Image = "curator:no-such-image-" + runID })
	if _, err := noImage.Provision(ctx, initSpec("managers")); err == nil || !strings.Contains(err.Error(), "make image") {
		t.Errorf("Provision of a missing image = %v, want an error that says how to build it", err)
	}
	if _, err := p.Provision(ctx, provider.Spec{Labels: map[string]string{labelAddress: "x"}}); !errors.Is(err, ErrInvalidSpec) {
		t.Errorf("Provision with a label of the provider's = %v, want ErrInvalidSpec", err)
	}
}

// Two leaders that pick the same address: Docker lets one container start
// with it, and the other Provision moves on to the next address, leaving
// nothing behind.
func TestAddressTaken(t *testing.T) {
	p := newTestProvider(t, nil)
	ctx := context.Background()
	a := providertest.Provision(t, p, initSpec("managers"))
	ap := netip.MustParseAddrPort(a.Address)

	p2, err := New(p.cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer p2.Close()
	if _, err := p2.provisionAt(ctx, initSpec("managers"), ap.Addr()); !errors.Is(err, errAddressTaken) {
		t.Fatalf("provisionAt a running container's address = %v, want errAddressTaken", err)
	}
	all, err := p.docker.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: p.ourFilter()})
	if err != nil {
		t.Fatal(err)
	}
	if len(all.Items) != 1 {
		t.Errorf("containers after a lost start = %d, want 1 (the loser removes its own)", len(all.Items))
	}

	b := providertest.Provision(t, p2, initSpec("managers"))
	if b.Address == a.Address {
		t.Fatalf("two live instances share address %s", a.Address)
	}
	if want := netip.AddrPortFrom(ap.Addr().Next(), ap.Port()).String(); b.Address != want {
		t.Errorf("second instance at %s, want the next address %s", b.Address, want)
	}
	waitHealthy(t, b.Address)
}

func TestPrune(t *testing.T) {
	var now atomic.Pointer[time.Time]
	p := newTestProvider(t, func(c *Config) {
		c.HostDir = t.TempDir()
		c.Now = func() time.Time {
			if n := now.Load(); n != nil {
				return *n
			}
			return time.Now()
		}
	})
	ctx := context.Background()

	// A node that exits at once: its container is dead, and what it
	// wrote last is its last words.
	dead := providertest.Provision(t, p, provider.Spec{Labels: initSpec("managers").Labels, Args: []string{"no-such-command"}})
	waitFor(t, "the container of `curator no-such-command` to exit", func() error {
		if s := containerState(t, p, dead.ID); s != container.StateExited {
			return fmt.Errorf("state %q", s)
		}
		return nil
	})
	// The agent's error, its last line (the commands it lists after it
	// change with the CLI).
	const lastWords = `Error: unknown command "no-such-command" for "curator" (it has agent, `
	if got, err := p.LastWords(ctx, dead.ID); err != nil || !strings.HasPrefix(got, lastWords) || strings.Contains(got, "\n") {
		t.Errorf("LastWords = %q, %v; want the one line %q...", got, err, lastWords)
	}
	// What a Provision that crashed between create and start leaves.
	if err := p.ensureNetwork(ctx); err != nil {
		t.Fatal(err)
	}
	halfMade := p.cfg.Network + "-00000001"
	_, err := p.docker.ContainerCreate(ctx, client.ContainerCreateOptions{
		Name:       halfMade,
		Config:     &container.Config{Image: testImage, Cmd: []string{"version"}, Labels: map[string]string{labelNetwork: p.cfg.Network, labelAddress: "172.30.0.250:7000"}},
		HostConfig: &container.HostConfig{NetworkMode: container.NetworkMode(p.cfg.Network)},
	})
	if err != nil {
		t.Fatal(err)
	}
	// A data dir a Provision that crashed earlier still left.
	orphan := p.cfg.Network + "-00000002"
	if err := os.MkdirAll(p.hostDataDir(orphan), 0o700); err != nil {
		t.Fatal(err)
	}
	live := providertest.Provision(t, p, initSpec("managers"))
	waitHealthy(t, live.Address)

	if diff := cmp.Diff([]provider.Instance{live}, providertest.List(t, p, nil), providertest.IgnoreCreated); diff != "" {
		t.Errorf("List with a dead and a half-made container (-want +got):\n%s", diff)
	}

	// Young, the half-made container and the orphan dir may be a
	// Provision at work: left alone. The dead container ran: it could
	// be started again, so Prune leaves it too, and ListDead lists it.
	pruned, err := p.Prune(ctx)
	if err != nil {
		t.Fatalf("Prune: %v", err)
	}
	if len(pruned) != 0 {
		t.Errorf("Prune = %v, want nothing", pruned)
	}
	deadList, err := p.ListDead(ctx, map[string]string{provider.LabelGroup: "managers"})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]provider.Instance{dead}, deadList, providertest.IgnoreCreated); diff != "" {
		t.Errorf("ListDead (-want +got):\n%s", diff)
	}
	if err := p.ClearDead(ctx, live.ID); !errors.Is(err, ErrNotDead) {
		t.Errorf("ClearDead of a live container = %v, want ErrNotDead", err)
	}
	if err := p.ClearDead(ctx, dead.ID); err != nil {
		t.Errorf("ClearDead: %v", err)
	}
	if deadList, err := p.ListDead(ctx, nil); err != nil || len(deadList) != 0 {
		t.Errorf("ListDead after ClearDead = %v, %v; want nothing", deadList, err)
	}
	later := time.Now().Add(2 * DefaultPruneGrace)
	now.Store(&later)
	pruned, err = p.Prune(ctx)
	if err != nil {
		t.Fatalf("Prune: %v", err)
	}
	if diff := cmp.Diff([]string{halfMade, orphan}, pruned); diff != "" {
		t.Errorf("Prune past the grace (-want +got):\n%s", diff)
	}
	for _, id := range []string{dead.ID, halfMade} {
		if s := containerState(t, p, id); s != "" {
			t.Errorf("container %s after Prune is %s, want it gone", id, s)
		}
	}
	if s := containerState(t, p, live.ID); s != container.StateRunning {
		t.Errorf("live container after Prune is %q, want running", s)
	}
	// A frozen machine (its container paused, as a stopped process) is
	// still there: listed, and not pruned.
	if _, err := p.docker.ContainerPause(ctx, live.ID, client.ContainerPauseOptions{}); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]provider.Instance{live}, providertest.List(t, p, nil), providertest.IgnoreCreated); diff != "" {
		t.Errorf("List with the live container paused (-want +got):\n%s", diff)
	}
	if pruned, err := p.Prune(ctx); err != nil || len(pruned) != 0 {
		t.Errorf("Prune with the live container paused = %v, %v; want nothing", pruned, err)
	}
	if _, err := p.docker.ContainerUnpause(ctx, live.ID, client.ContainerUnpauseOptions{}); err != nil {
		t.Fatal(err)
	}
	if pruned, err := p.Prune(ctx); err != nil || len(pruned) != 0 {
		t.Errorf("Prune again = %v, %v; want nothing", pruned, err)
	}
	if got, err := p.LastWords(ctx, dead.ID); err != nil || got != "" {
		t.Errorf("LastWords of a pruned container = %q, %v; want nothing", got, err)
	}
}

// Provision makes the network when it is missing; a network of that name
// with another subnet is refused, not changed.
func TestEnsureNetwork(t *testing.T) {
	existing := newTestProvider(t, nil)
	ctx := context.Background()
	name := fmt.Sprintf("curator-test-%s-%d", runID, networkSeq.Add(1))
	var p *Provider
	for try := 0; ; try++ {
		var err error
		p, err = New(Config{Network: name, Subnet: fmt.Sprintf("172.30.%d.0/24", 100+rand.IntN(150)), Image: testImage})
		if err != nil {
			t.Fatal(err)
		}
		err = p.ensureNetwork(ctx)
		if err == nil {
			break
		}
		p.Close()
		if try == 10 || !strings.Contains(err.Error(), "overlap") {
			t.Fatalf("ensureNetwork: %v", err)
		}
	}
	t.Cleanup(func() {
		if err := removeNetwork(context.Background(), p.docker, name); err != nil {
			t.Errorf("cleanup: %v", err)
		}
		p.Close()
	})
	n, err := p.docker.NetworkInspect(ctx, name, client.NetworkInspectOptions{})
	if err != nil {
		t.Fatalf("the network was not made: %v", err)
	}
	subnet, _ := p.cfg.subnet()
	if got := n.Network.IPAM.Config; len(got) != 1 || got[0].Subnet != subnet || got[0].Gateway != gateway(subnet) {
		t.Errorf("network IPAM = %+v, want subnet %s, gateway %s", got, subnet, gateway(subnet))
	}
	if n.Network.Labels[labelNetwork] != name {
		t.Errorf("network labels = %v, want %s=%s", n.Network.Labels, labelNetwork, name)
	}
	if err := p.ensureNetwork(ctx); err != nil {
		t.Errorf("ensureNetwork again: %v", err)
	}
	// Another provider that expects another subnet under the same name.
	cfg := p.cfg
	cfg.Subnet = existing.cfg.Subnet
	p2, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer p2.Close()
	if _, err := p2.Provision(ctx, initSpec("managers")); !errors.Is(err, ErrNetworkMismatch) {
		t.Errorf("Provision on a network with another subnet = %v, want ErrNetworkMismatch", err)
	}
}
