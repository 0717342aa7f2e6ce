package netfault

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// A Cgroup is a cgroup (v2) of its own for processes that share a uid
// with others (the chaos suite's agents all run as its own user): nft
// tells their packets apart by it (FromCgroup), while they run on.
// Processes are moved in (Add) and back where they were (Close).
type Cgroup struct {
	dir   string // its directory in the cgroup2 mount
	match string // the nft expression that matches its sockets
	mu    sync.Mutex
	from  map[int]string // pid → the cgroup directory it came from
}

// nftCgroupRoot is where nft looks up a cgroup's path: a cgroup2 mount
// elsewhere (outside this directory) cannot be named to it.
const nftCgroupRoot = "/sys/fs/cgroup"

// cgroup2Mount finds the cgroup2 mount, or says why there is none nft
// can use.
func cgroup2Mount() (string, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return "", err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTIONS... - FSTYPE SOURCE ...
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		fields := strings.Fields(pre)
		if !ok || len(fields) < 5 || !strings.HasPrefix(post, "cgroup2 ") {
			continue
		}
		mnt := fields[4]
		if mnt != nftCgroupRoot && !strings.HasPrefix(mnt, nftCgroupRoot+"/") {
			continue
		}
		return mnt, nil
	}
	return "", fmt.Errorf("no cgroup2 mount under %s, where nft looks cgroups up", nftCgroupRoot)
}

// NewCgroup makes the cgroup path (relative to the cgroup2 mount, like
// "curator-chaos-123/manager-2"), or says why it cannot.
func NewCgroup(path string) (*Cgroup, error) {
	if err := Available(); err != nil {
		return nil, err
	}
	mnt, err := cgroup2Mount()
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(mnt, path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("make cgroup %s: %w", dir, err)
	}
	rel, err := filepath.Rel(nftCgroupRoot, dir)
	if err != nil {
		return nil, err
	}
	level := len(strings.Split(filepath.Clean(path), "/"))
	return &Cgroup{dir: dir, from: map[int]string{},
		match: fmt.Sprintf("socket cgroupv2 level %d %q", level, rel)}, nil
}

// FromCgroup matches what a process of c sends. nft cannot match what
// a process outside c sends (a process of a shallower cgroup has no
// ancestor at c's level, and matches neither way): let c's own traffic
// through first (Table.Pass), then drop by address.
func (c *Cgroup) FromCgroup() string { return c.match }

// Add moves the process pid into c (its threads go with it).
func (c *Cgroup) Add(pid int) error {
	from, err := cgroupOf(pid)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(c.dir, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0); err != nil {
		return fmt.Errorf("move %d into %s: %w", pid, c.dir, err)
	}
	c.mu.Lock()
	c.from[pid] = from
	c.mu.Unlock()
	return nil
}

// cgroupOf is the directory of pid's cgroup (v2) in the mount.
func cgroupOf(pid int) (string, error) {
	mnt, err := cgroup2Mount()
	if err != nil {
		return "", err
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "0::"); ok {
			return filepath.Join(mnt, rest), nil
		}
	}
	return "", fmt.Errorf("process %d has no cgroup v2", pid)
}

// Close moves c's processes back where they came from, and removes c. A
// process that started in c (a child of one moved in) goes where its
// parent came from, or to the root.
func (c *Cgroup) Close() error {
	c.mu.Lock()
	from := c.from
	c.from = map[int]string{}
	c.mu.Unlock()
	var errs []error
	if b, err := os.ReadFile(filepath.Join(c.dir, "cgroup.procs")); err == nil {
		home := ""
		for _, dir := range from {
			home = dir
			break
		}
		if home == "" {
			home = filepath.Dir(filepath.Dir(c.dir)) // the mount, for c two levels down
			if mnt, err := cgroup2Mount(); err == nil {
				home = mnt
			}
		}
		for _, p := range strings.Fields(string(b)) {
			if pid, err := strconv.Atoi(p); err == nil {
				if _, known := from[pid]; !known {
					from[pid] = home
				}
			}
		}
	}
	for pid, dir := range from {
		err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0)
		if err != nil && !errors.Is(err, os.ErrNotExist) && !errors.Is(err, syscall.ESRCH) {
			errs = append(errs, fmt.Errorf("move %d back to %s: %w", pid, dir, err))
		}
	}
	if err := os.Remove(c.dir); err != nil && !errors.Is(err, os.ErrNotExist) {
		errs = append(errs, fmt.Errorf("remove cgroup %s: %w", c.dir, err))
	}
	return errors.Join(errs...)
}

// RemoveCgroup removes the cgroup path (relative to the mount) once its
// children are gone: the parent a test made its cgroups under.
func RemoveCgroup(path string) error {
	mnt, err := cgroup2Mount()
	if err != nil {
		return err
	}
	if err := os.Remove(filepath.Join(mnt, path)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

// RemoveStaleCgroups removes the cgroups prefix+PID (and the cgroups in
// them) of processes that are gone: a test binary that died before its
// clean-up. Their processes, if any still run, go back to the root.
func RemoveStaleCgroups(prefix string) {
	mnt, err := cgroup2Mount()
	if err != nil {
		return
	}
	dirs, _ := filepath.Glob(filepath.Join(mnt, prefix+"*"))
	for _, dir := range dirs {
		pid, err := strconv.Atoi(strings.TrimPrefix(filepath.Base(dir), prefix))
		if err != nil || pid == os.Getpid() || syscall.Kill(pid, 0) != syscall.ESRCH {
			continue
		}
		children, _ := os.ReadDir(dir)
		for _, c := range children {
			if !c.IsDir() {
				continue
			}
			procs, _ := os.ReadFile(filepath.Join(dir, c.Name(), "cgroup.procs"))
			for _, p := range strings.Fields(string(procs)) {
				_ = os.WriteFile(filepath.Join(mnt, "cgroup.procs"), []byte(p), 0)
			}
			_ = os.Remove(filepath.Join(dir, c.Name()))
		}
		_ = os.Remove(dir)
	}
}
