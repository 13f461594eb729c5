// Package metric builds a package's Prometheus series on the Registerer
// its constructor was given, the same way in every package:
//
//   - a nil Registerer registers nothing (the series still count, unseen);
//   - a registration failure (a name taken twice) is returned by Err, never
//     a panic: constructors return it as their error.
//
// It is promauto.With without the panic.
package metric

import (
	"errors"
	"fmt"
	"reflect"

	"github.com/prometheus/client_golang/prometheus"
)

// Factory creates and registers series. Not safe for concurrent use: a
// constructor uses it, then checks Err.
type Factory struct {
	reg  prometheus.Registerer
	errs []error
}

// New returns a Factory registering on reg (nil: nowhere).
func New(reg prometheus.Registerer) *Factory { return &Factory{reg: reg} }

// Register registers c (unless the Registerer is nil) and returns it. On
// a Shared Registerer, a series already registered there under the same
// name, of the same type, is returned instead of c.
func Register[C prometheus.Collector](f *Factory, c C) C {
	if f.reg != nil {
		if err := f.reg.Register(c); err != nil {
			var are prometheus.AlreadyRegisteredError
			if _, ok := f.reg.(shared); ok && errors.As(err, &are) {
				// The same concrete type: a Gauge would pass as a Counter.
				if existing, ok := are.ExistingCollector.(C); ok && reflect.TypeOf(are.ExistingCollector) == reflect.TypeOf(c) {
					return existing
				}
			}
			f.errs = append(f.errs, err)
		}
	}
	return c
}

// Shared returns reg for a second instance of a package in one process
// (the receiver's idmap and tracker on their own MySQL pool in yidu serve,
// beside the dashboard's): its series are the first instance's, so both
// count into them (counters, histograms and Inc/Dec gauges add up).
func Shared(reg prometheus.Registerer) prometheus.Registerer { return shared{reg} }

type shared struct{ prometheus.Registerer }

// Counter returns a registered counter.
func (f *Factory) Counter(name, help string) prometheus.Counter {
	return Register(f, prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help}))
}

// CounterVec returns a registered counter vector.
func (f *Factory) CounterVec(name, help string, labels ...string) *prometheus.CounterVec {
	return Register(f, prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels))
}

// Gauge returns a registered gauge.
func (f *Factory) Gauge(name, help string) prometheus.Gauge {
	return Register(f, prometheus.NewGauge(prometheus.GaugeOpts{Name: name, Help: help}))
}

// GaugeVec returns a registered gauge vector.
func (f *Factory) GaugeVec(name, help string, labels ...string) *prometheus.GaugeVec {
	return Register(f, prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: help}, labels))
}

// GaugeFunc registers a gauge whose value fn reports at scrape time.
func (f *Factory) GaugeFunc(name, help string, fn func() float64) {
	Register(f, prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, fn))
}

// Histogram returns a registered histogram.
func (f *Factory) Histogram(name, help string, buckets []float64) prometheus.Histogram {
	return Register(f, prometheus.NewHistogram(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets}))
}

// HistogramVec returns a registered histogram vector.
func (f *Factory) HistogramVec(name, help string, buckets []float64, labels ...string) *prometheus.HistogramVec {
	return Register(f, prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets}, labels))
}

// Err returns every registration failure so far, or nil, prefixed with
// the component.
func (f *Factory) Err(component string) error {
	if len(f.errs) == 0 {
		return nil
	}
	return fmt.Errorf("%s: register metrics: %w", component, errors.Join(f.errs...))
}

// Preset resolves (and so exposes at 0) every combination of the label
// values given per label, so dashboards and alerts see a series before
// its first event. Pass a vector's MetricVec: m.reads.MetricVec.
func Preset(v *prometheus.MetricVec, values ...[]string) {
	var walk func(prefix []string, rest [][]string)
	walk = func(prefix []string, rest [][]string) {
		if len(rest) == 0 {
			_, _ = v.GetMetricWithLabelValues(prefix...) // arity is the caller's, fixed at compile time
			return
		}
		for _, val := range rest[0] {
			walk(append(prefix[:len(prefix):len(prefix)], val), rest[1:])
		}
	}
	walk(nil, values)
}
