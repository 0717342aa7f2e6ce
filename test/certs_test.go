package e2e

import (
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/curatorproject/curator/internal/testenv"
	"github.com/curatorproject/curator/pki"
)

// certTTL is the cluster's cert_ttl in TestCertRenewal: the minimum, so
// that a renewal comes every six or seven seconds.
const certTTL = 10 * time.Second

// TestCertRenewal: a cluster whose certificates live ten seconds keeps
// every node ready over several renewals without a session ending (the
// agents' session counters stay put, but for moves off the leader, while node ls, which dials anew each
// time, keeps reaching curators whose first certificate has long expired);
// etcd serves its renewed certificate; a removed node's renewal is
// refused; the admin certificate renews; a cert TTL out of bounds is
// refused and changes nothing.
func TestCertRenewal(t *testing.T) {
	parallel(t) // its own addresses and dirs
	c := newCluster(t, "127.0.170.")
	withTTL := func(name string, env map[string]string, verb string, args ...string) *node {
		if verb == "init" {
			args = append(args, "--cert-ttl", certTTL.String())
		}
		return c.agentEnv(name, env, verb, args...)
	}
	c.buildWith(withTTL, 3, 2)
	names := []string{"manager-1", "manager-2", "manager-3", "worker-1", "worker-2"}
	hosts := map[string]int{"manager-1": 10, "manager-2": 11, "manager-3": 12, "worker-1": 13, "worker-2": 14}

	info, err := clusterInfo(t, c.config)
	if err != nil {
		t.Fatal(err)
	}
	if info.CertTTL != certTTL.String() {
		t.Fatalf("cluster info cert_ttl %q, want %q", info.CertTTL, certTTL)
	}
	metrics := func(name string) map[string]float64 {
		t.Helper()
		body, err := httpGetOK(fmt.Sprintf("http://%s%d:%d/metrics", c.subnet, hosts[name], port+3))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return parseMetrics(body)
	}
	// The sessions that ended other than to move off the leader (which
	// asks the nodes that reached it directly to, once it has led a
	// while: those of a cluster just built, at any time in the test).
	ended := func(m map[string]float64) float64 {
		return m[`curator_agent_session_ends_total{reason="lost"}`] + m[`curator_agent_session_ends_total{reason="refused"}`]
	}
	sessions := map[string]float64{}
	for _, n := range names {
		m := metrics(n)
		if m["curator_agent_sessions_total"] < 1 {
			t.Fatalf("%s: %v sessions", n, m["curator_agent_sessions_total"])
		}
		sessions[n] = ended(m)
	}
	first, err := nodeLs(t, c.config)
	if err != nil {
		t.Fatal(err)
	}
	firstExpiry := map[string]time.Time{}
	for _, n := range first {
		if n.CertExpires == nil {
			t.Fatalf("%s: no cert_expires in node ls -o json", n.Name)
		}
		firstExpiry[n.Name] = *n.CertExpires
	}

	// Three lives of a certificate: every node renews at least four times.
	// node ls dials anew each time, and the curators' first certificates
	// expire within ten seconds: it works only if they serve renewed ones.
	start := time.Now()
	for time.Since(start) < 3*certTTL {
		nodes, err := nodeLs(t, c.config)
		if err != nil {
			t.Fatalf("after %s: %v", time.Since(start).Round(time.Millisecond), err)
		}
		if err := allReady(nodes, names...); err != nil {
			t.Fatalf("after %s: %v", time.Since(start).Round(time.Millisecond), err)
		}
		time.Sleep(500 * time.Millisecond)
	}
	last, err := nodeLs(t, c.config)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range last {
		if n.CertExpires == nil || !n.CertExpires.After(firstExpiry[n.Name].Add(2*certTTL)) {
			t.Errorf("%s: certificate expires %v, want well after %v", n.Name, n.CertExpires, firstExpiry[n.Name])
		}
	}
	for _, n := range names {
		m := metrics(n)
		if got := ended(m); got != sessions[n] {
			t.Errorf("%s: %v sessions ended other than to move off the leader after the renewals, %v before: a session ended", n, got, sessions[n])
		}
		if got := m[`curator_agent_cert_renewals_total{outcome="ok"}`]; got < 3 {
			t.Errorf("%s: %v renewals in %s, want at least 3", n, got, 3*certTTL)
		}
		if exp := m["curator_agent_cert_expiry_timestamp_seconds"]; time.Unix(int64(exp), 0).Before(time.Now()) {
			t.Errorf("%s: the agent's certificate expired at %v", n, time.Unix(int64(exp), 0))
		}
	}
	// The leader's gauge: the earliest expiry in the fleet, still ahead.
	leaderGauge := 0.0
	for _, n := range names[:3] {
		if g := metrics(n)["curator_node_cert_earliest_expiry_timestamp_seconds"]; g > 0 {
			leaderGauge = g
		}
	}
	if at := time.Unix(int64(leaderGauge), 0); at.Before(time.Now()) || at.After(time.Now().Add(certTTL+time.Second)) {
		t.Errorf("earliest expiry in the fleet: %v, want within the next %s", at, certTTL)
	}
	// etcd presents a renewed certificate on a new connection (it reads
	// its files at each handshake), for each manager.
	for _, n := range names[:3] {
		conn, err := tls.Dial("tcp", fmt.Sprintf("%s%d:%d", c.subnet, hosts[n], port+2), &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS13})
		if err != nil {
			t.Fatalf("%s: etcd: %v", n, err)
		}
		served := conn.ConnectionState().PeerCertificates[0]
		conn.Close()
		if !served.NotAfter.After(firstExpiry[n].Add(certTTL)) {
			t.Errorf("%s: etcd serves a certificate that expires %v, not a renewed one", n, served.NotAfter)
		}
	}

	// A removed node cannot renew: its agent's next renewal is refused.
	if _, _, err := cli(t, "--config", c.config, "node", "rm", "--force", "worker-2"); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 2*certTTL, "worker-2's renewal refused", func() error {
		if got := metrics("worker-2")[`curator_agent_cert_renewals_total{outcome="refused"}`]; got < 1 {
			return fmt.Errorf("%v refusals", got)
		}
		return nil
	})
	log, err := os.ReadFile(c.nodes["worker-2"].proc.log)
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`certificate renewal refused.*(not a member of this cluster|was removed from this cluster)`).Match(log) {
		t.Error("worker-2's log does not say why its renewal was refused")
	}

	// A cert TTL out of bounds is refused with the bounds, and nothing
	// changes.
	for _, ttl := range []string{"1s", "87600h"} {
		_, stderr, err := cli(t, "--config", c.config, "cluster", "update", "--cert-ttl", ttl)
		if err == nil || !strings.Contains(stderr, "cert TTL") {
			t.Errorf("cluster update --cert-ttl %s: %v, %q; want a refusal about the cert TTL", ttl, err, stderr)
		}
	}
	if info, err := clusterInfo(t, c.config); err != nil || info.CertTTL != certTTL.String() {
		t.Errorf("after the refused updates: cert_ttl %q (%v), want %q", info.CertTTL, err, certTTL)
	}
	if _, _, err := cli(t, "--config", c.config, "cluster", "update", "--cert-ttl", "20s"); err != nil {
		t.Fatal(err)
	}
	if info, err := clusterInfo(t, c.config); err != nil || info.CertTTL != "20s" {
		t.Errorf("after cluster update --cert-ttl 20s: cert_ttl %q (%v)", info.CertTTL, err)
	}

	// The admin certificate renews: a new one for the same key, and the
	// config still works.
	adminCrt := filepath.Join(filepath.Dir(c.config), "admin.crt")
	before, err := pki.ReadCert(adminCrt)
	if err != nil {
		t.Fatal(err)
	}
	out, _, err := cli(t, "--config", c.config, "cluster", "admin-cert")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "admin certificate renewed") {
		t.Errorf("cluster admin-cert said %q", out)
	}
	after, err := pki.ReadCert(adminCrt)
	if err != nil {
		t.Fatal(err)
	}
	if after.SerialNumber.Cmp(before.SerialNumber) == 0 || !after.NotAfter.After(before.NotAfter) {
		t.Errorf("admin certificate not renewed: serial %v then %v, expiry %v then %v", before.SerialNumber, after.SerialNumber, before.NotAfter, after.NotAfter)
	}
	// The name and organisation stay; a certificate with no role is an
	// admin's, and its renewal says so (OU=admin).
	if after.Subject.CommonName != before.Subject.CommonName || !slices.Equal(after.Subject.Organization, before.Subject.Organization) {
		t.Errorf("admin certificate subject %q, was %q", after.Subject, before.Subject)
	}
	if ou := after.Subject.OrganizationalUnit; len(before.Subject.OrganizationalUnit) == 0 && !slices.Equal(ou, []string{"admin"}) {
		t.Errorf("renewed admin certificate's role %q, want admin", ou)
	}
	if _, err := nodeLs(t, c.config); err != nil {
		t.Errorf("node ls with the renewed admin certificate: %v", err)
	}
}

// httpGetOK GETs url and returns its body; any status but 200 is an
// error.
func httpGetOK(url string) (string, error) {
	resp, err := (&http.Client{Timeout: 5 * time.Second}).Get(url)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return string(body), nil
}

// parseMetrics reads Prometheus' text format: "name{labels} value" lines.
func parseMetrics(body string) map[string]float64 {
	m := map[string]float64{}
	for line := range strings.Lines(body) {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		if v, err := strconv.ParseFloat(line[i+1:], 64); err == nil {
			m[line[:i]] = v
		}
	}
	return m
}
