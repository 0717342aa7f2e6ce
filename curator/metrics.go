package curator

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
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
}

// NewMetrics creates the collectors and registers them with reg (nil: not
// registered, for tests).
func NewMetrics(reg prometheus.Registerer) *Metrics {
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
		Nodes: f.NewGaugeVec(prometheus.GaugeOpts{
			Name: "curator_nodes", Help: "Nodes by status, as the leader last saw them.",
		}, []string{"status"}),
	}
}
