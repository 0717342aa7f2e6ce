// Package metrics holds the curator's Prometheus collectors, which the
// API, the leader's loops and the node agent update.
package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/curatorproject/curator/curator/spec"
	pb "github.com/curatorproject/curator/proto"
)

// Metrics are the curator's Prometheus collectors. One set per process,
// registered once; every curator run (and every leadership) reuses it.
type Metrics struct {
	Ticks         *prometheus.CounterVec
	Actions       *prometheus.CounterVec
	Refusals      *prometheus.CounterVec
	Errors        *prometheus.CounterVec
	Converge      *prometheus.HistogramVec
	LeaderChanges prometheus.Counter
	IsLeader      prometheus.Gauge
	Nodes         *prometheus.GaugeVec
	// Rollouts counts rollouts by the state they reached; NodesRolled the
	// machines they replaced, RollSeconds the time each took.
	Rollouts    *prometheus.CounterVec
	NodesRolled prometheus.Counter
	RollSeconds prometheus.Histogram
	// CertEarliestExpiry is when the first node certificate of the fleet
	// expires (Unix seconds), as the leader's registry says; 0 on a
	// curator that does not lead. CertRenewals counts the renewals the
	// leader issued.
	CertEarliestExpiry prometheus.Gauge
	CertRenewals       prometheus.Counter
	// AgentSessions counts the sessions an agent opened with the leader
	// (a session stream each); AgentSessionEnds how they (or their
	// set-ups) ended, by reason (moved: off the leader, as it asked;
	// refused: the cluster refuses the node; lost: any other, a manager
	// gone or no answer in time); AgentCertRenewals the renewals of its
	// certificates, by outcome (ok, error, refused); AgentCertExpiry when
	// its node certificate expires (Unix seconds).
	AgentSessions     prometheus.Counter
	AgentSessionEnds  *prometheus.CounterVec
	AgentCertRenewals *prometheus.CounterVec
	AgentCertExpiry   prometheus.Gauge
	// SwarmNodes counts the Swarm's nodes by role and state, as the
	// leader's swarm sync last read them (none with the flavor off).
	SwarmNodes *prometheus.GaugeVec
	// SessionsRefused counts the session set-ups this manager refused
	// with a time to come back (admission.go); SessionsReforwarded the
	// node streams it forwarded again to a new leader
	// (forward_session.go).
	SessionsRefused     prometheus.Counter
	SessionsReforwarded prometheus.Counter
	// SessionsDigested counts the node streams this follower switched to
	// liveness digests; LivenessReports the digests the leader took from
	// it; LivenessHeartbeats the heartbeats the leader took in digests
	// (liveness.go).
	SessionsDigested prometheus.Counter
	// SessionHeartbeats counts the heartbeats the leader read on session
	// streams (the others come in digests).
	SessionHeartbeats  prometheus.Counter
	LivenessReports    prometheus.Counter
	LivenessHeartbeats prometheus.Counter
	// RefusalsUnaudited counts refused management calls whose audit
	// entry was not written: too many waiting, or etcd not reached
	// within the bound (audit.go).
	RefusalsUnaudited prometheus.Counter
	// JoinsRefused counts the joins the leader refused, by reason
	// (join_refusals.go).
	JoinsRefused *prometheus.CounterVec
	// HandshakesShed counts the connections closed in their TLS
	// handshake because every handshake slot was taken (server.go).
	HandshakesShed prometheus.Counter
	// Connections counts the connections the gRPC server took up, each
	// after a TLS handshake (full or resumed); JoinConnectionsKept the
	// joins whose connection became the node's (conn_binding.go), and
	// JoinConnectionSessions the sessions set up on such a connection.
	Connections, JoinConnectionsKept, JoinConnectionSessions prometheus.Counter
	// QuorumTolerance is how many more voters may fail before etcd loses
	// its quorum (healthy voters less a majority), QuorumVoters how many
	// voters there are, as the leader's consensus sync last counted them
	// (Membership.QuorumAfter, as `cluster info` counts). No labels: a
	// curator that does not lead exports neither (leaderGone).
	QuorumTolerance *prometheus.GaugeVec
	QuorumVoters    *prometheus.GaugeVec
	// RolloutState is 1 for each group's rollout, labelled by the state
	// its record holds; RolloutProgress when it last moved on (its start,
	// or its last machine replaced: Unix seconds); RolloutDeadline its
	// progress_deadline in seconds. GroupHeld is 1 while the group loop
	// holds a group's repairs, by reason (repair-ceiling, suspended,
	// provider-failing, crash-backoff). All on the leader only.
	RolloutState    *prometheus.GaugeVec
	RolloutProgress *prometheus.GaugeVec
	RolloutDeadline *prometheus.GaugeVec
	GroupHeld       *prometheus.GaugeVec
	// AgentHeartbeatAnswers is how long this agent waited for the
	// answer to each heartbeat (node/session.go).
	AgentHeartbeatAnswers prometheus.Histogram
	// CAExpiry is when the cluster CA's certificate expires (Unix
	// seconds), on every manager: no certificate is issued past it.
	CAExpiry prometheus.Gauge
}

// The reasons of GroupHeld.
const (
	HeldRepairCeiling   = "repair-ceiling"
	HeldSuspended       = "suspended"
	HeldProviderFailing = "provider-failing"
	HeldCrashBackoff    = "crash-backoff"
	// HeldDomainDark: a failure domain holding machines of the group is
	// dark, and its machines are held.
	HeldDomainDark = "domain-dark"
)

// SetQuorum sets the quorum gauges from the healthy voters and voters.
func (m *Metrics) SetQuorum(healthy, voters, need int) {
	m.QuorumTolerance.WithLabelValues().Set(float64(healthy - need))
	m.QuorumVoters.WithLabelValues().Set(float64(voters))
}

// SetRollout sets group's rollout gauges from its record ro (nil: none),
// of progress deadline deadline.
func (m *Metrics) SetRollout(group string, ro *pb.Rollout, deadline time.Duration) {
	m.RolloutState.DeletePartialMatch(prometheus.Labels{"group": group})
	if ro == nil {
		m.RolloutProgress.DeleteLabelValues(group)
		m.RolloutDeadline.DeleteLabelValues(group)
		return
	}
	m.RolloutState.WithLabelValues(group, spec.RolloutWord(ro.State)).Set(1)
	progress := ro.Started
	if ro.StepStarted != nil && ro.StepStarted.AsTime().After(progress.AsTime()) {
		progress = ro.StepStarted
	}
	m.RolloutProgress.WithLabelValues(group).Set(float64(progress.AsTime().Unix()))
	m.RolloutDeadline.WithLabelValues(group).Set(deadline.Seconds())
}

// SetHeld sets group's GroupHeld for reason.
func (m *Metrics) SetHeld(group, reason string, held bool) {
	v := 0.0
	if held {
		v = 1
	}
	m.GroupHeld.WithLabelValues(group, reason).Set(v)
}

// GroupGone drops every gauge of group.
func (m *Metrics) GroupGone(group string) {
	for _, v := range []*prometheus.GaugeVec{m.RolloutState, m.RolloutProgress, m.RolloutDeadline, m.GroupHeld} {
		v.DeletePartialMatch(prometheus.Labels{"group": group})
	}
}

// LeaderGone drops what only a leader exports, as its leadership ends.
func (m *Metrics) LeaderGone() {
	m.CertEarliestExpiry.Set(0)
	for _, v := range []*prometheus.GaugeVec{m.QuorumTolerance, m.QuorumVoters, m.RolloutState, m.RolloutProgress, m.RolloutDeadline, m.GroupHeld} {
		v.Reset()
	}
}

// New creates the collectors and registers them with reg (nil: not
// registered, for tests).
func New(reg prometheus.Registerer) *Metrics {
	f := promauto.With(reg)
	return &Metrics{
		Ticks: f.NewCounterVec(prometheus.CounterOpts{
			Name: "curator_loop_ticks_total", Help: "Ticks of each leader loop.",
		}, []string{"loop"}),
		Actions: f.NewCounterVec(prometheus.CounterOpts{
			Name: "curator_loop_actions_total", Help: "Changes made by each leader loop, by kind.",
		}, []string{"loop", "action"}),
		Refusals: f.NewCounterVec(prometheus.CounterOpts{
			Name: "curator_loop_refusals_total", Help: "Ticks in which a loop refused to act for safety.",
		}, []string{"loop"}),
		Errors: f.NewCounterVec(prometheus.CounterOpts{
			Name: "curator_loop_errors_total", Help: "Failed ticks of each leader loop.",
		}, []string{"loop"}),
		Converge: f.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "curator_loop_converge_seconds",
			Help:    "Time from a loop first seeing a difference to seeing none.",
			Buckets: []float64{.01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
		}, []string{"loop"}),
		LeaderChanges: f.NewCounter(prometheus.CounterOpts{
			Name: "curator_leader_changes_total", Help: "Times this curator became leader.",
		}),
		IsLeader: f.NewGauge(prometheus.GaugeOpts{
			Name: "curator_is_leader", Help: "1 while this curator leads.",
		}),
		Rollouts: f.NewCounterVec(prometheus.CounterOpts{
			Name: "curator_rollouts_total", Help: "Rollouts by the state they reached: started, done, failed, cancelled, paused, resumed.",
		}, []string{"state"}),
		NodesRolled: f.NewCounter(prometheus.CounterOpts{
			Name: "curator_rollout_nodes_total", Help: "Machines a rollout replaced.",
		}),
		RollSeconds: f.NewHistogram(prometheus.HistogramOpts{
			Name:    "curator_rollout_node_seconds",
			Help:    "Seconds a rollout took per machine (from the previous one, or its start, to the machine's destruction).",
			Buckets: []float64{1, 2, 5, 10, 20, 30, 60, 120, 300},
		}),
		CertEarliestExpiry: f.NewGauge(prometheus.GaugeOpts{
			Name: "curator_node_cert_earliest_expiry_timestamp_seconds",
			Help: "When the node certificate that expires first in the fleet expires (Unix time), on the leader; 0 elsewhere.",
		}),
		CertRenewals: f.NewCounter(prometheus.CounterOpts{
			Name: "curator_cert_renewals_total", Help: "Node certificate renewals this curator issued as leader.",
		}),
		AgentSessions: f.NewCounter(prometheus.CounterOpts{
			Name: "curator_agent_sessions_total", Help: "Sessions (session streams) this agent opened with the leader.",
		}),
		AgentSessionEnds: f.NewCounterVec(prometheus.CounterOpts{
			Name: "curator_agent_session_ends_total", Help: "This agent's sessions (and session set-ups) that ended, by reason: moved (off the leader, as it asked), refused (the cluster refuses this node), lost (a manager gone, no answer in time, any other).",
		}, []string{"reason"}),
		AgentCertRenewals: f.NewCounterVec(prometheus.CounterOpts{
			Name: "curator_agent_cert_renewals_total", Help: "This agent's certificate renewals, by outcome: ok, error (tried again), refused (the node was removed).",
		}, []string{"outcome"}),
		AgentCertExpiry: f.NewGauge(prometheus.GaugeOpts{
			Name: "curator_agent_cert_expiry_timestamp_seconds", Help: "When this agent's node certificate expires (Unix time).",
		}),
		SessionsRefused: f.NewCounter(prometheus.CounterOpts{
			Name: "curator_sessions_refused_total", Help: "Session set-ups this manager refused with a time to come back (its admission rate, or no leader known).",
		}),
		SessionsReforwarded: f.NewCounter(prometheus.CounterOpts{
			Name: "curator_sessions_reforwarded_total", Help: "Node session streams this manager forwarded again, to a new leader.",
		}),
		SessionsDigested: f.NewCounter(prometheus.CounterOpts{
			Name: "curator_sessions_digested_total", Help: "Node session streams this follower switched to liveness digests: their heartbeats reported to the leader a batch at a time.",
		}),
		SessionHeartbeats: f.NewCounter(prometheus.CounterOpts{
			Name: "curator_session_heartbeats_total", Help: "Heartbeats the leader read on node session streams (not in liveness digests).",
		}),
		LivenessReports: f.NewCounter(prometheus.CounterOpts{
			Name: "curator_liveness_reports_total", Help: "Liveness digests this follower reported and the leader took.",
		}),
		LivenessHeartbeats: f.NewCounter(prometheus.CounterOpts{
			Name: "curator_liveness_heartbeats_total", Help: "Heartbeats the leader took in its followers' liveness digests.",
		}),
		RefusalsUnaudited: f.NewCounter(prometheus.CounterOpts{
			Name: "curator_audit_refusals_lost_total", Help: "Refused management calls this manager could not record in the audit trail (too many waiting, or etcd not reached in time).",
		}),
		JoinsRefused: f.NewCounterVec(prometheus.CounterOpts{
			Name: "curator_joins_refused_total", Help: "Joins (Register) the leader refused, by reason: malformed-token, other-cluster (the token names another CA), wrong-secret (neither join token's), removed-node.",
		}, []string{"reason"}),
		HandshakesShed: f.NewCounter(prometheus.CounterOpts{
			Name: "curator_tls_handshakes_shed_total", Help: "Connections this manager closed in their TLS handshake because every handshake slot was taken for too long.",
		}),
		Connections: f.NewCounter(prometheus.CounterOpts{
			Name: "curator_connections_total", Help: "Connections this manager's gRPC server took up, each after a TLS handshake, full or resumed.",
		}),
		JoinConnectionsKept: f.NewCounter(prometheus.CounterOpts{
			Name: "curator_join_connections_kept_total", Help: "Joins through this manager whose connection it kept as the node's, for its first session (the Register proved the node's key on it): a handshake the node did not need.",
		}),
		JoinConnectionSessions: f.NewCounter(prometheus.CounterOpts{
			Name: "curator_join_connection_sessions_total", Help: "Node sessions set up through this manager on the node's join's connection (no handshake of their own).",
		}),
		QuorumTolerance: f.NewGaugeVec(prometheus.GaugeOpts{
			Name: "curator_quorum_failures_tolerated", Help: "Voters that may still fail before etcd loses its quorum (healthy voters less a majority), as the leader counts them; 0 or less: none. Only on the leader.",
		}, nil),
		QuorumVoters: f.NewGaugeVec(prometheus.GaugeOpts{
			Name: "curator_quorum_voters", Help: "etcd's voters, as the leader counts them. Only on the leader.",
		}, nil),
		RolloutState: f.NewGaugeVec(prometheus.GaugeOpts{
			Name: "curator_rollout_state", Help: "1 for each group's last rollout, labelled by its state: rolling, paused, done, failed, cancelled. Only on the leader.",
		}, []string{"group", "state"}),
		RolloutProgress: f.NewGaugeVec(prometheus.GaugeOpts{
			Name: "curator_rollout_progress_timestamp_seconds", Help: "When each group's last rollout last moved on: its start, or its last machine replaced (Unix time). Only on the leader.",
		}, []string{"group"}),
		RolloutDeadline: f.NewGaugeVec(prometheus.GaugeOpts{
			Name: "curator_rollout_progress_deadline_seconds", Help: "Each group's rollout.progress_deadline: how long a new machine has to be ready. Only on the leader.",
		}, []string{"group"}),
		GroupHeld: f.NewGaugeVec(prometheus.GaugeOpts{
			Name: "curator_group_repairs_held", Help: "1 while the group loop holds a group's repairs, by reason: repair-ceiling (max_unhealthy or max_replacements), suspended (a restore, group suspend), provider-failing, crash-backoff (its new machines die before joining), domain-dark (a failure domain of its machines is dark). Only on the leader.",
		}, []string{"group", "reason"}),
		AgentHeartbeatAnswers: f.NewHistogram(prometheus.HistogramOpts{
			Name:    "curator_agent_heartbeat_answer_seconds",
			Help:    "Seconds this agent waited for the answer to each heartbeat.",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5},
		}),
		CAExpiry: f.NewGauge(prometheus.GaugeOpts{
			Name: "curator_ca_cert_expiry_timestamp_seconds", Help: "When the cluster CA's certificate expires (Unix time), on a manager; no certificate is issued past it.",
		}),
		SwarmNodes: f.NewGaugeVec(prometheus.GaugeOpts{
			Name: "curator_swarm_nodes", Help: "The Docker Swarm's nodes by role and state, as the leader last read them (Swarm flavor).",
		}, []string{"role", "state"}),
		Nodes: f.NewGaugeVec(prometheus.GaugeOpts{
			Name: "curator_nodes", Help: "Nodes by status, as the leader last saw them.",
		}, []string{"status"}),
	}
}
