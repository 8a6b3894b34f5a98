package handlers

import (
	"strconv"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/flashline/flashline/loadshed"
)

// Metrics are the HTTP layer's Prometheus metrics.
type Metrics struct {
	requests *prometheus.CounterVec
	latency  *prometheus.HistogramVec
}

// NewMetrics registers the HTTP metrics (and the limiter's gauges) on reg.
func NewMetrics(reg prometheus.Registerer, limiter *loadshed.Limiter) *Metrics {
	m := &Metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "flashline_http_requests_total",
			Help: "HTTP requests by route and outcome (an error code of the contract, or ok).",
		}, []string{"route", "outcome"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "flashline_http_request_duration_seconds",
			Help:    "HTTP request latency by route.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5},
		}, []string{"route"}),
	}
	reg.MustRegister(m.requests, m.latency)
	if limiter != nil {
		reg.MustRegister(
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{
				Name: "flashline_loadshed_limit", Help: "The admission limiter's current concurrency limit.",
			}, func() float64 { return float64(limiter.Limit()) }),
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{
				Name: "flashline_loadshed_in_flight", Help: "Requests inside the admission limiter now.",
			}, func() float64 { return float64(limiter.InFlight()) }),
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{
				Name: "flashline_loadshed_queued", Help: "Requests waiting in the admission limiter's queue now.",
			}, func() float64 { return float64(limiter.Queued()) }),
			prometheus.NewCounterFunc(prometheus.CounterOpts{
				Name: "flashline_loadshed_shed_total", Help: "Requests refused by the admission limiter.",
			}, func() float64 { return float64(limiter.Shed()) }),
		)
	}
	return m
}

func (m *Metrics) middleware() gin.HandlerFunc {
	return func(c *gin.Context) {
		start := time.Now()
		c.Next()
		route := c.FullPath()
		if route == "" {
			route = "unmatched"
		}
		outcome := c.GetString(outcomeKey)
		if outcome == "" {
			outcome = strconv.Itoa(c.Writer.Status())
		}
		m.requests.WithLabelValues(route, outcome).Inc()
		m.latency.WithLabelValues(route).Observe(time.Since(start).Seconds())
	}
}
