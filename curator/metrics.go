package curator

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/curatorproject/curator/curator/internal/metrics"
)

// Metrics are the curator's Prometheus collectors (curator/internal/metrics).
type Metrics = metrics.Metrics

// NewMetrics makes the collectors and registers them with reg (nil: not
// registered, for tests).
func NewMetrics(reg prometheus.Registerer) *Metrics { return metrics.New(reg) }
