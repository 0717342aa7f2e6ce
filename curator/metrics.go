package curator

import (
	"github.com/prometheus/client_golang/prometheus"
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
}

// NewMetrics creates the collectors and registers them with reg (nil: not
// registered, for tests).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		Ticks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "curator_loop_ticks_total", Help: "Ticks of each leader loop.",
		}, []string{"loop"}),
		Actions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "curator_loop_actions_total", Help: "Changes made by each leader loop, by kind.",
		}, []string{"loop", "action"}),
		Refusals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "curator_loop_refusals_total", Help: "Ticks in which a loop refused to act for safety.",
		}, []string{"loop"}),
		Errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "curator_loop_errors_total", Help: "Failed ticks of each leader loop.",
		}, []string{"loop"}),
		Converge: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "curator_loop_converge_seconds",
			Help:    "Time from a loop first seeing a difference to seeing none.",
			Buckets: []float64{.01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
		}, []string{"loop"}),
		LeaderChanges: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "curator_leader_changes_total", Help: "Times this curator became leader.",
		}),
		IsLeader: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "curator_is_leader", Help: "1 while this curator leads.",
		}),
		Nodes: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "curator_nodes", Help: "Nodes by status, as the leader last saw them.",
		}, []string{"status"}),
	}
	if reg != nil {
		reg.MustRegister(m.Ticks, m.Actions, m.Refusals, m.Errors, m.Converge, m.LeaderChanges, m.IsLeader, m.Nodes)
	}
	return m
}
