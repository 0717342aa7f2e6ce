package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/curatorproject/curator/internal/testenv"
)

// chromium finds a Chromium (or Chrome) to drive, or says why there is none.
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Skip("no chromium on the PATH (apt-get install chromium; .ci/run installs it): the dashboard test needs a real browser")
	return ""
}

// uiRow is a row of the dashboard's node table.
type uiRow struct {
	Name   string `json:"name"`
	Status string `json:"status"`
}

// TestUIOnDev runs `curator dev`, the operator commands in their idiom, and
// `curator ui` with dev's config in a headless Chromium: the page shows
// every node and the curator leader, and shows a worker killed for good as
// down without a reload. Screenshots are kept in the test's temp dir and,
// when CURATOR_SCREENSHOT_DIR is set, there too.
func TestUIOnDev(t *testing.T) {
	parallel(t) // its own addresses and dirs
	browser := chromium(t)
	dir := t.TempDir()
	var stdout syncBuffer
	dev := start(t, "dev", filepath.Join(dir, "dev.log"), &stdout, "dev", "--managers", "3", "--workers", "2", "--dir", dir, "--addresses", "127.0.212.10-127.0.212.40")
	t.Cleanup(func() { stopDevNodes(t, dir) })
	waitDevUp(t, dev, &stdout, 3*time.Minute)
	config := filepath.Join(dir, "config.yaml")
	nodes, err := nodeLs(t, config)
	if err != nil {
		t.Fatal(err)
	}
	info, err := clusterInfo(t, config)
	if err != nil {
		t.Fatal(err)
	}

	// node ls --filter role=consensus -q prints exactly the managers' IDs.
	var managers []string
	for _, n := range nodes {
		if slices.Contains(n.Roles, "consensus") {
			managers = append(managers, n.ID)
		}
	}
	out, _, err := cli(t, "--config", config, "node", "ls", "--filter", "role=consensus", "-q")
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Fields(out); len(managers) != 3 || !sameSet(got, managers) || len(got) != len(managers) {
		t.Errorf("node ls --filter role=consensus -q printed %q, want the managers' IDs %v", out, managers)
	}

	// The page, in a real browser.
	const uiAddr = "127.0.212.2:8080"
	var uiOut syncBuffer
	start(t, "ui", filepath.Join(dir, "ui.log"), &uiOut, "--config", config, "ui", "--listen", uiAddr)
	testenv.Eventually(t, 30*time.Second, "curator ui serves", func() error {
		resp, err := http.Get("http://" + uiAddr + "/api/state")
		if err != nil {
			return err
		}
		resp.Body.Close()
		return nil
	})
	if !strings.Contains(uiOut.String(), "loopback only") {
		t.Errorf("curator ui does not say it serves loopback only: %q", uiOut.String())
	}
	// The watches, from the CLI: node ls --watch and events --follow,
	// both stopped with Ctrl-C (SIGINT).
	var watchOut, followOut syncBuffer
	watch := start(t, "node ls --watch", filepath.Join(dir, "watch.log"), &watchOut, "--config", config, "node", "ls", "--watch")
	follow := start(t, "events --follow", filepath.Join(dir, "follow.log"), &followOut, "--config", config, "events", "--follow", "-o", "json", "--limit", "1")

	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(browser), chromedp.NoSandbox, chromedp.DisableGPU, chromedp.WindowSize(1500, 1000))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancelAlloc()
	bctx, cancelBrowser := chromedp.NewContext(actx)
	defer cancelBrowser()
	if _, err := chromedp.Run(bctx, chromedp.Navigate("http://"+uiAddr+"/")); err != nil {
		t.Fatalf("open the dashboard: %v", err)
	}
	rows := func() ([]uiRow, string, error) {
		ctx, cancel := context.WithTimeout(bctx, 10*time.Second)
		defer cancel()
		rows, err := chromedp.Run(ctx, chromedp.Evaluate[[]uiRow](`[...document.querySelectorAll("#nodes tbody tr")].map(r => ({name: r.dataset.name, status: r.dataset.status}))`))
		if err != nil {
			return nil, "", err
		}
		leader, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector("#leader").textContent`))
		return rows, leader, err
	}
	leaderName := info.Names[info.Leader]
	testenv.Eventually(t, 30*time.Second, "the page shows every node and the leader", func() error {
		got, leader, err := rows()
		if err != nil {
			return err
		}
		for _, n := range nodes {
			if !slices.ContainsFunc(got, func(r uiRow) bool { return r.Name == n.Name && r.Status == "ready" }) {
				return fmt.Errorf("no ready row for %s: %+v", n.Name, got)
			}
		}
		if leaderName == "" || !strings.Contains(leader, leaderName) {
			return fmt.Errorf("leader shown %q, want %q", leader, leaderName)
		}
		return nil
	})
	screenshot(t, bctx, "dashboard.png")

	// At 1,400 px every column of the node table shows, Version too; and
	// each event's time has its date.
	evaluate := func(what, js string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(bctx, 10*time.Second)
		defer cancel()
		got, err := chromedp.Run(ctx, chromedp.Evaluate[string](js))
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		return got
	}
	if _, err := chromedp.Run(bctx, chromedp.EmulateViewport(1400, 1000)); err != nil {
		t.Fatal(err)
	}
	if got := evaluate("the node table's fit", `(() => {
		const s = document.querySelector("#nodes-section"), th = [...document.querySelectorAll("#nodes thead th")].pop();
		return th.textContent + " " + (s.scrollWidth <= s.clientWidth && th.getBoundingClientRect().right <= s.getBoundingClientRect().right ? "fits" : "cut off");
	})()`); got != "Version fits" {
		t.Errorf("at 1,400 px the node table's last column: %q, want Version fits", got)
	}
	screenshot(t, bctx, "dashboard-1400.png")
	testenv.Eventually(t, 30*time.Second, "event times with their date", func() error {
		got := evaluate("event time", `(document.querySelector("#events tbody td.time") || {}).textContent || ""`)
		if !regexp.MustCompile(`^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d$`).MatchString(got) {
			return fmt.Errorf("event time %q", got)
		}
		return nil
	})

	// A worker killed for good: the same page, not reloaded, shows it
	// down. (Its group removes the record of a down node whose process is
	// gone at once, and makes another; the page keeps showing the node as
	// it last was, down, for a minute.)
	victim := nodeOfGroup(t, config, "workers")
	killInstance(t, victim.InstanceID)
	testenv.Eventually(t, 30*time.Second, "the page shows "+victim.Name+" down", func() error {
		got, _, err := rows()
		if err != nil {
			return err
		}
		if !slices.Contains(got, uiRow{Name: victim.Name, Status: "down"}) {
			return fmt.Errorf("rows %+v", got)
		}
		return nil
	})
	screenshot(t, bctx, "dashboard-node-down.png")
	// Once its group removed it, its row stays a while, greyed, its pill
	// saying removed (not a green ready).
	testenv.Eventually(t, time.Minute, "the page shows "+victim.Name+" removed", func() error {
		got := evaluate("removed row", `[...document.querySelectorAll("#nodes tbody tr[data-removed]")].map(r => r.dataset.name + ":" + r.querySelector(".status .badge").textContent).join(",")`)
		if !strings.Contains(got, victim.Name+":removed") {
			return fmt.Errorf("removed rows %q", got)
		}
		return nil
	})

	testenv.Eventually(t, 30*time.Second, "node ls --watch prints the table again with "+victim.Name+" down", func() error {
		for line := range strings.Lines(watchOut.String()) {
			if f := strings.Fields(line); len(f) > 4 && f[1] == victim.Name && f[4] == "down" {
				return nil
			}
		}
		return errors.New("not yet")
	})
	testenv.Eventually(t, 30*time.Second, "events --follow prints events", func() error {
		if strings.Count(followOut.String(), "\n") < 2 {
			return errors.New("fewer than two events")
		}
		return nil
	})
	for _, p := range []*proc{watch, follow} {
		if err := p.cmd.Process.Signal(syscall.SIGINT); err != nil {
			t.Fatal(err)
		}
		if err := p.wait(t, 10*time.Second); err != nil {
			t.Errorf("%s after Ctrl-C: %v, want exit status 0", p.name, err)
		}
	}
	before := evaluate("rows", `String(document.querySelectorAll("#nodes tbody tr").length)`)
	if err := dev.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := dev.wait(t, 30*time.Second); err != nil {
		t.Errorf("dev after SIGTERM: %v", err)
	}

	// No manager answers: one message says since when, the tables keep
	// the last state, greyed, and the badge is not live.
	testenv.Eventually(t, time.Minute, "the page says no manager answers", func() error {
		got := evaluate("outage", `JSON.stringify({
			msgs: [...document.querySelectorAll("#errors div")].map(d => d.textContent),
			live: document.querySelector("#live").textContent,
			stale: document.body.classList.contains("stale"),
			rows: String(document.querySelectorAll("#nodes tbody tr").length)})`)
		var page struct {
			Msgs  []string
			Live  string
			Stale bool
			Rows  string
		}
		if err := json.Unmarshal([]byte(got), &page); err != nil {
			return err
		}
		if len(page.Msgs) != 1 || !regexp.MustCompile(`^No manager answers since \d{4}-\d\d-\d\d \d\d:\d\d:\d\d`).MatchString(page.Msgs[0]) ||
			page.Live == "live" || !page.Stale || page.Rows != before {
			return fmt.Errorf("page %+v; want one outage message, not live, greyed, %s rows kept", page, before)
		}
		return nil
	})
	screenshot(t, bctx, "dashboard-no-manager.png")
}

// screenshot saves the page as name in the test's temp dir, and in
// $CURATOR_SCREENSHOT_DIR if it is set.
func screenshot(t *testing.T, bctx context.Context, name string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(bctx, 20*time.Second)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Errorf("screenshot %s: %v", name, err)
		return
	}
	dirs := []string{t.TempDir()}
	if d := os.Getenv("CURATOR_SCREENSHOT_DIR"); d != "" {
		dirs = append(dirs, d)
	}
	for _, d := range dirs {
		p := filepath.Join(d, name)
		if err := os.WriteFile(p, png, 0o644); err != nil {
			t.Errorf("screenshot: %v", err)
			continue
		}
		t.Logf("screenshot: %s", p)
	}
}

func sameSet(a, b []string) bool {
	a, b = slices.Sorted(slices.Values(a)), slices.Sorted(slices.Values(b))
	return slices.Equal(a, b)
}
