package chaos

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/api/types/network"
	dockerclient "github.com/moby/moby/client"

	"github.com/curatorproject/curator/curator"
	"github.com/curatorproject/curator/internal/dockertest"
	"github.com/curatorproject/curator/internal/netfault"
	"github.com/curatorproject/curator/provider"
	"github.com/curatorproject/curator/provider/docker"
	"github.com/curatorproject/curator/provider/process"
)

// machines is how the schedule hits the machine behind a node, by its
// instance ID: processes on loopback (the process provider) or containers
// on a Docker network (the docker provider).
type machines interface {
	// kill kills the machine's process (-9), for good.
	kill(ctx context.Context, id string) error
	// reboot kills it and starts it again from its data.
	reboot(ctx context.Context, id string) error
	// restart is a reboot with env added to the agent's environment
	// (the fault variables of a faults build). errNoRestartEnv: this
	// variant cannot.
	restart(ctx context.Context, id string, env map[string]string) error
	// freeze and thaw stop its process and continue it.
	freeze(ctx context.Context, id string) error
	thaw(ctx context.Context, id string) error
	// cut cuts it off the network, heal joins it again at its address
	// and says what the cut did, if it knows. errNoPartition: this
	// variant cannot (here).
	cut(ctx context.Context, id string) error
	heal(ctx context.Context, id string) (string, error)
	// alive says whether the machine runs.
	alive(id string) bool
	// killAll ends every machine of the run.
	killAll()
	// keepLogs writes what the machines still there logged into dir,
	// where the variant does not keep it with their data already.
	keepLogs(dir string) error
	// powerOff kills dev (its pid) and every machine's process at once,
	// and says how many processes it killed. errNoPowerLoss: this
	// variant's dev does not restart (it says so at once).
	powerOff(devPID int) (int, error)
}

// errNoPartition: processes on one host share the loopback interface and
// (here) one uid: the process variant cuts one off by moving its process
// into a cgroup of its own and dropping its packets with nftables
// (internal/netfault), which takes root and nft. Where it cannot, a cut
// step freezes the node instead, which its peers see the same way
// (silence), and a partition step is skipped.
var errNoPartition = errors.New("no partitions here")

// errNoRestartEnv: a variant whose machines keep the environment they
// were made with (a container's).
var errNoRestartEnv = errors.New("a container keeps the environment it was made with")

// chaosTablePrefix starts the nftables tables of the process variant's
// cuts (the test's pid and the instance follow), chaosCgroup the cgroups
// (under it, one per cut instance).
const chaosTablePrefix = "curator_chaos_"

func chaosCgroup() string { return fmt.Sprintf("%s%d", chaosCgroupPrefix, os.Getpid()) }

const chaosCgroupPrefix = "curator-chaos-"

// processCut is a process cut off: its table of drops and its cgroup.
type processCut struct {
	tab     *netfault.Table
	cg      *netfault.Cgroup
	aborted int // its connections to the others, ended at the cut
}

// processMachines are the process provider's instances in dir.
type processMachines struct {
	dir  string
	prov *process.Provider

	// noPartition says why cut cannot cut a process off here (nil: it
	// can).
	noPartition error

	mu     sync.Mutex
	frozen map[string]int // instance ID → pid
	cuts   map[string]processCut
}

func newProcessMachines(dir string) (*processMachines, error) {
	pool, err := process.PoolAddresses(addresses, port)
	if err != nil {
		return nil, err
	}
	prov, err := process.New(process.Config{Dir: dir, Binary: binary, Addresses: pool})
	if err != nil {
		return nil, err
	}
	m := &processMachines{dir: dir, prov: prov, frozen: map[string]int{}, cuts: map[string]processCut{}}
	if err := os.MkdirAll(m.delayDir(), 0o755); err != nil {
		return nil, err
	}
	m.noPartition = netfault.Available()
	if _, err := exec.LookPath("ss"); m.noPartition == nil && err != nil {
		m.noPartition = fmt.Errorf("a cut ends a process's connections with ss (iproute2): %w", err)
	}
	if m.noPartition == nil {
		netfault.RemoveStaleCgroups(chaosCgroupPrefix)
		// The cgroup a cut needs, made and removed again.
		cg, err := netfault.NewCgroup(chaosCgroup() + "/probe")
		if err == nil {
			err = errors.Join(cg.Close(), netfault.RemoveCgroup(chaosCgroup()))
		}
		m.noPartition = err
	}
	return m, nil
}

// pid finds instance id's process by its data dir.
func (m *processMachines) pid(id string) (int, error) {
	out, err := exec.Command("pgrep", "-f", "--", m.instanceDir(id)).Output()
	if err != nil {
		return 0, fmt.Errorf("no process of instance %s", id)
	}
	fields := strings.Fields(string(out))
	if len(fields) != 1 {
		return 0, fmt.Errorf("instance %s has %d processes", id, len(fields))
	}
	return strconv.Atoi(fields[0])
}

func (m *processMachines) instanceDir(id string) string {
	return filepath.Join(m.dir, "instances", id) + "/"
}

func (m *processMachines) signal(id string, sig syscall.Signal) (int, error) {
	pid, err := m.pid(id)
	if err != nil {
		return 0, err
	}
	return pid, syscall.Kill(pid, sig)
}

func (m *processMachines) kill(_ context.Context, id string) error {
	_, err := m.signal(id, syscall.SIGKILL)
	return err
}

func (m *processMachines) reboot(ctx context.Context, id string) error {
	return m.restart(ctx, id, nil)
}

func (m *processMachines) restart(ctx context.Context, id string, env map[string]string) error {
	if err := m.kill(ctx, id); err != nil {
		return err
	}
	for gone := time.Now(); m.alive(id) && time.Since(gone) < 5*time.Second; {
		time.Sleep(10 * time.Millisecond)
	}
	env = maps(env) // a copy, never nil
	env[curator.FaultDelayDirEnv] = m.delayDir()
	_, err := m.prov.Start(ctx, id, []string{"agent", "run", "--data-dir", provider.PlaceholderDataDir}, env)
	return err
}

func (m *processMachines) freeze(_ context.Context, id string) error {
	pid, err := m.signal(id, syscall.SIGSTOP)
	if err == nil {
		m.mu.Lock()
		m.frozen[id] = pid
		m.mu.Unlock()
	}
	return err
}

func (m *processMachines) thaw(_ context.Context, id string) error {
	m.mu.Lock()
	pid, ok := m.frozen[id]
	delete(m.frozen, id)
	m.mu.Unlock()
	if !ok {
		return nil
	}
	return syscall.Kill(pid, syscall.SIGCONT)
}

// cut cuts the instance's process off from every other address of the
// pool, both ways: its process moved into a cgroup of its own, what that
// cgroup sends to the pool's other addresses dropped, and what anyone
// else sends to its address (the test's clients too, as a network cut
// would); its open connections to the others ended (a reset each, the
// one thing a real cut would not send). Its traffic to itself passes.
func (m *processMachines) cut(ctx context.Context, id string) error {
	if m.noPartition != nil {
		return fmt.Errorf("%w: %v", errNoPartition, m.noPartition)
	}
	pid, err := m.pid(id)
	if err != nil {
		return err
	}
	ip, err := m.address(ctx, id)
	if err != nil {
		return err
	}
	name := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			return r
		}
		return '_'
	}, strings.ToLower(id))
	tab, _, err := netfault.New(chaosTablePrefix, name)
	if err != nil {
		return err
	}
	cg, err := netfault.NewCgroup(chaosCgroup() + "/" + name)
	if err == nil {
		err = cg.Add(pid)
	}
	if err == nil {
		err = tab.Drop(cg.FromCgroup()+" ip daddr "+addresses+" ip daddr != "+ip, id+" -> the others")
	}
	if err == nil {
		err = tab.Pass(cg.FromCgroup(), id+" to itself")
	}
	if err == nil {
		err = tab.Drop(netfault.ToIP(ip), "the others -> "+id)
	}
	aborted := 0
	if err == nil {
		// Its open connections to the others were made before the
		// move, outside the cgroup's match: ended, to be made again
		// (and dropped). Those to itself, and those made to it (whose
		// every packet from the others is dropped), stay.
		aborted, err = netfault.AbortConnections(pid, func(local, remote netip.AddrPort) bool {
			return remote.Addr().String() == ip || local.Addr().String() == ip
		})
	}
	if err != nil {
		err = errors.Join(err, tab.Delete())
		if cg != nil {
			err = errors.Join(err, cg.Close())
		}
		return err
	}
	m.mu.Lock()
	m.cuts[id] = processCut{tab: tab, cg: cg, aborted: aborted}
	m.mu.Unlock()
	return nil
}

// address is the instance's IP.
func (m *processMachines) address(ctx context.Context, id string) (string, error) {
	list, err := m.prov.List(ctx, nil)
	if err != nil {
		return "", err
	}
	for _, in := range list {
		if in.ID == id {
			ip, _, err := net.SplitHostPort(in.Address)
			return ip, err
		}
	}
	return "", fmt.Errorf("no instance %s", id)
}

// heal ends the instance's cut, and says how many packets it dropped.
func (m *processMachines) heal(_ context.Context, id string) (string, error) {
	m.mu.Lock()
	c, ok := m.cuts[id]
	delete(m.cuts, id)
	m.mu.Unlock()
	if !ok {
		return "", nil
	}
	dropped, total, err := c.tab.Heal()
	err = errors.Join(err, c.tab.Delete(), c.cg.Close())
	return fmt.Sprintf("%d packets dropped (%d from it, %d to it), %d of its connections ended at the cut",
		total, dropped[id+" -> the others"], dropped["the others -> "+id], c.aborted), err
}

func (m *processMachines) alive(id string) bool {
	return exec.Command("pgrep", "-f", "--", m.instanceDir(id)).Run() == nil
}

// keepLogs: each instance's log is in its dir already.
func (m *processMachines) keepLogs(string) error { return nil }

func (m *processMachines) killAll() {
	defer func() {
		m.mu.Lock()
		var ids []string
		for id := range m.cuts {
			ids = append(ids, id)
		}
		m.mu.Unlock()
		for _, id := range ids {
			_, _ = m.heal(context.Background(), id)
		}
		_ = netfault.RemoveCgroup(chaosCgroup())
	}()
	pattern := filepath.Join(m.dir, "instances") + "/"
	for range 50 {
		_ = exec.Command("pkill", "-CONT", "-f", "--", pattern).Run()
		_ = exec.Command("pkill", "-9", "-f", "--", pattern).Run()
		time.Sleep(100 * time.Millisecond)
		if exec.Command("pgrep", "-f", "--", pattern).Run() != nil {
			return
		}
	}
}

// dockerMachines are the docker provider's containers on a network.
type dockerMachines struct {
	docker  *dockerclient.Client
	network string

	mu  sync.Mutex
	ips map[string]netip.Addr // cut containers' addresses
}

// newDockerMachines builds the curator image and makes the containers of
// the Docker network net (on subnet) the test's machines; the test's end
// removes them, the network and the image. It skips the test where no
// Docker daemon answers.
func newDockerMachines(t *testing.T, net, subnet string) (m *dockerMachines, p *docker.Provider, image string) {
	t.Helper()
	p, image = dockertest.Image(t, net, subnet, net)
	cli, err := dockerclient.New(dockerclient.FromEnv)
	if err != nil {
		t.Fatal(err)
	}
	m = &dockerMachines{docker: cli, network: net, ips: map[string]netip.Addr{}}
	t.Cleanup(func() {
		m.killAll()
		_ = exec.Command("sh", "-c", "docker network rm "+net+"; docker rmi -f "+image).Run()
		cli.Close()
	})
	return m, p, image
}

func (m *dockerMachines) kill(ctx context.Context, id string) error {
	_, err := m.docker.ContainerKill(ctx, id, dockerclient.ContainerKillOptions{Signal: "KILL"})
	return err
}

func (m *dockerMachines) reboot(ctx context.Context, id string) error {
	now := 0
	_, err := m.docker.ContainerRestart(ctx, id, dockerclient.ContainerRestartOptions{Signal: "KILL", Timeout: &now})
	return err
}

func (m *dockerMachines) restart(ctx context.Context, id string, env map[string]string) error {
	if len(env) > 0 {
		return errNoRestartEnv
	}
	return m.reboot(ctx, id)
}

func (m *dockerMachines) freeze(ctx context.Context, id string) error {
	_, err := m.docker.ContainerPause(ctx, id, dockerclient.ContainerPauseOptions{})
	return err
}

func (m *dockerMachines) thaw(ctx context.Context, id string) error {
	_, err := m.docker.ContainerUnpause(ctx, id, dockerclient.ContainerUnpauseOptions{})
	return err
}

func (m *dockerMachines) cut(ctx context.Context, id string) error {
	in, err := m.docker.ContainerInspect(ctx, id, dockerclient.ContainerInspectOptions{})
	if err != nil {
		return err
	}
	ep := in.Container.NetworkSettings.Networks[m.network]
	if ep == nil || !ep.IPAddress.IsValid() {
		return fmt.Errorf("container %s has no address on %s", id, m.network)
	}
	m.mu.Lock()
	m.ips[id] = ep.IPAddress
	m.mu.Unlock()
	_, err = m.docker.NetworkDisconnect(ctx, m.network, dockerclient.NetworkDisconnectOptions{Container: id, Force: true})
	return err
}

func (m *dockerMachines) heal(ctx context.Context, id string) (string, error) {
	m.mu.Lock()
	ip, ok := m.ips[id]
	delete(m.ips, id)
	m.mu.Unlock()
	if !ok {
		return "", nil
	}
	// Its old address: the node's certificate names it.
	_, err := m.docker.NetworkConnect(ctx, m.network, dockerclient.NetworkConnectOptions{
		Container:      id,
		EndpointConfig: &network.EndpointSettings{IPAMConfig: &network.EndpointIPAMConfig{IPv4Address: ip}},
	})
	return "", err
}

func (m *dockerMachines) alive(id string) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	in, err := m.docker.ContainerInspect(ctx, id, dockerclient.ContainerInspectOptions{})
	return err == nil && in.Container.State != nil && in.Container.State.Running
}

// keepLogs writes each container's log (the agent's stdout and stderr)
// into dir, as NAME.log: Docker drops it with the container.
func (m *dockerMachines) keepLogs(dir string) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	list, err := m.docker.ContainerList(ctx, dockerclient.ContainerListOptions{All: true, Filters: dockerclient.Filters{}.Add("network", m.network)})
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	var errs []error
	for _, c := range list.Items {
		name := strings.TrimPrefix(c.Names[0], "/")
		errs = append(errs, func() error {
			logs, err := m.docker.ContainerLogs(ctx, c.ID, dockerclient.ContainerLogsOptions{ShowStdout: true, ShowStderr: true, Timestamps: true})
			if err != nil {
				return err
			}
			defer logs.Close()
			f, err := os.Create(filepath.Join(dir, name+".log"))
			if err != nil {
				return err
			}
			_, err = stdcopy.StdCopy(f, f, logs)
			return errors.Join(err, f.Close())
		}())
	}
	return errors.Join(errs...)
}

func (m *dockerMachines) killAll() {
	// dev removes its containers when it stops; this catches what a
	// failed run leaves, the paused and the cut-off ones included.
	_ = exec.Command("sh", "-c", "docker rm -f $(docker ps -aq --filter network="+m.network+") 2>/dev/null").Run()
}
