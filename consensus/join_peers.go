package consensus

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"time"

	"go.uber.org/zap"
)

// joinPeersPoll is how often waitPeersList asks the peers again.
const joinPeersPoll = 200 * time.Millisecond

// waitPeersList waits until every peer of j that answers lists this
// member, j.MemberID at peerURL, in its view of the cluster (the peer
// API's /members), and fails if one still does not when ctx ends.
//
// Why: a joining etcd takes its member ID from the first peer that
// answers (in the order of their peer URLs), matching members by peer URL,
// and a peer that is itself a learner replaying the log answers with the
// membership as it was at the point it got to. When this member's peer URL
// belonged to a member removed since (a dead manager replaced at its
// address, as a group does, and after a forced new cluster the whole old
// membership comes back in the replay), that view can match every URL and
// hand this member the removed one's ID: etcd then runs as a member the
// cluster does not have, and never becomes ready. A peer's view only moves
// forward, so once every peer that answers lists this member, etcd's own
// look finds it too.
func waitPeersList(ctx context.Context, j JoinParams, self, peerURL string, cert tls.Certificate, ca *x509.Certificate, lg *zap.Logger) error {
	var urls []string
	for _, p := range j.Peers {
		if p.NodeID != self && p.PeerURL != peerURL {
			urls = append(urls, p.PeerURL)
		}
	}
	slices.Sort(urls)
	if len(urls) == 0 || j.MemberID == 0 {
		return nil
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	hc := &http.Client{
		Timeout:   time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{Certificates: []tls.Certificate{cert}, RootCAs: pool, MinVersion: tls.VersionTLS13}},
	}
	defer hc.CloseIdleConnections()
	warned := false
	for {
		stale := ""
		for _, u := range urls {
			members, err := peerMembers(ctx, hc, u)
			if err != nil {
				continue // down or not serving: etcd skips it too
			}
			if !slices.ContainsFunc(members, func(m peerMember) bool {
				return m.ID == j.MemberID && slices.Contains(m.PeerURLs, peerURL)
			}) {
				stale = u
				break
			}
		}
		if stale == "" {
			return nil
		}
		if !warned {
			lg.Info("waiting for a peer whose view of the cluster is behind to list this member before joining",
				zap.String("peer", stale), zap.String("member", hexID(j.MemberID)))
			warned = true
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("join etcd: peer %s does not list this node's member %s at %s (its view of the cluster is behind): %w", stale, hexID(j.MemberID), peerURL, ctx.Err())
		case <-time.After(joinPeersPoll):
		}
	}
}

// peerMember is a member as the peer API's /members lists it.
type peerMember struct {
	ID       uint64   `json:"id"`
	PeerURLs []string `json:"peerURLs"`
}

func peerMembers(ctx context.Context, hc *http.Client, peerURL string) ([]peerMember, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, peerURL+"/members", nil)
	if err != nil {
		return nil, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s/members: %s", peerURL, resp.Status)
	}
	var members []peerMember
	if err := json.NewDecoder(resp.Body).Decode(&members); err != nil {
		return nil, err
	}
	return members, nil
}
