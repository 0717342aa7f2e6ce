package node

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/curatorproject/curator/curator"
	"github.com/curatorproject/curator/curator/spec"
	"github.com/curatorproject/curator/internal/nodeport"
	"github.com/curatorproject/curator/supervisor"
)

// HTTPPortOffset: the agent serves /metrics and /healthz at PORT+3.
const HTTPPortOffset = nodeport.HTTP

// healthz is what /healthz says about the node. A manager also says
// whether the cluster has a quorum, as its etcd sees it: "ok", "lost" (the
// answer is 503, and message says which managers answer and what to do)
// or "unknown" (message says why).
type healthz struct {
	NodeID        string `json:"node_id"`
	Consensus     string `json:"consensus"`
	CuratorLeader bool   `json:"curator_leader"`
	Quorum        string `json:"quorum,omitempty"`
	Message       string `json:"message,omitempty"`
}

// runHTTP serves Prometheus metrics and a health check. Plain HTTP, with
// no credential: scrapers and load balancers expect it, and it tells
// nothing secret and changes nothing (docs/architecture.md, "Who may do
// what"). Keep it so: nothing that holds a secret or acts goes here.
func (a *Agent) runHTTP(ctx context.Context) error {
	ip, port, err := spec.SplitAddress(a.state.Address)
	if err != nil {
		return err
	}
	addr := net.JoinHostPort(ip.String(), strconv.Itoa(port+HTTPPortOffset))
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("metrics listener on %s: %w (is another process using PORT+3?)", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(a.registry, promhttp.HandlerOpts{}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		h := healthz{NodeID: a.state.NodeID, Consensus: "none"}
		code := http.StatusOK
		if e, cur := a.consensus.get(); e != nil {
			h.Consensus = e.Status().State.String()
			h.CuratorLeader = cur != nil && cur.IsLeader()
			if voters, ok := e.StartingVoters(); ok {
				if lost, msg := curator.StartingQuorumLost(voters); lost {
					h.Quorum, h.Message, code = "lost", msg, http.StatusServiceUnavailable
				}
			}
			if cur != nil {
				switch err := cur.Quorum(); {
				case err == nil:
					h.Quorum = "ok"
				case errors.Is(err, spec.ErrQuorum):
					h.Quorum, h.Message, code = "lost", err.Error(), http.StatusServiceUnavailable
				default:
					h.Quorum, h.Message = "unknown", err.Error()
				}
			}
		}
		if dir, ok := devClusterDir(a.cfg.DataDir); ok {
			h.Message = strings.Replace(h.Message, curator.QuorumAdvice, curator.DevQuorumAdvice(dir), 1)
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		_ = json.NewEncoder(w).Encode(h)
	})
	if a.cfg.Pprof {
		// Not /debug/pprof/cmdline: the command line may hold the join
		// token (`agent join --token`), and this port takes no
		// credential.
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(lis) }()
	supervisor.Signal(ctx, supervisor.Healthy)
	select {
	case <-ctx.Done():
		sctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
		<-errc
		return ctx.Err()
	case err := <-errc:
		if errors.Is(err, http.ErrServerClosed) {
			return nil
		}
		return err
	}
}

// devClusterDir is the dir of the dev cluster (`curator dev --dir DIR`)
// whose node has dataDir, DIR/instances/ID/data beside DIR/dev.json (the
// process provider's layout, and the settings dev records), so that its
// advice names dev's commands, not `agent run` by hand.
func devClusterDir(dataDir string) (string, bool) {
	instance := filepath.Dir(filepath.Clean(dataDir))
	instances := filepath.Dir(instance)
	if filepath.Base(dataDir) != "data" || filepath.Base(instances) != "instances" {
		return "", false
	}
	dir := filepath.Dir(instances)
	if _, err := os.Stat(filepath.Join(dir, "dev.json")); err != nil {
		return "", false
	}
	return dir, true
}
