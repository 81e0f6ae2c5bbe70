package nodeprobe

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Metrics are a node's metric families by name, as GET /metrics exposes
// them in Prometheus' text format.
type Metrics map[string]*dto.MetricFamily

// ReadMetrics reads GET /metrics of the node whose metrics listener is
// addr.
func ReadMetrics(ctx context.Context, c *http.Client, addr string) (Metrics, error) {
	body, err := get(ctx, c, nodeURL(addr, "/metrics"))
	if err != nil {
		return nil, fmt.Errorf("nodeprobe: metrics: %w", err)
	}
	m, err := ParseMetrics(body)
	if err != nil {
		return nil, fmt.Errorf("nodeprobe: metrics of %s: %w", addr, err)
	}
	return m, nil
}

// ParseMetrics parses a Prometheus text exposition.
func ParseMetrics(text []byte) (Metrics, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(bytes.NewReader(text))
	if err != nil {
		return nil, err
	}
	return Metrics(fams), nil
}

// Sum adds up the samples of the metric called name whose labels match
// every matcher, and says whether there was one. A matcher is
// label="value" (PromQL's equality; the quotes may be left out). name is
// a family's name, or a summary's or histogram's with _count or _sum.
// Sum panics on a matcher without "=", which is the caller's bug.
func (m Metrics) Sum(name string, matchers ...string) (sum float64, found bool) {
	want := make(map[string]string, len(matchers))
	for _, s := range matchers {
		k, v, ok := strings.Cut(s, "=")
		if !ok {
			panic(fmt.Sprintf("nodeprobe: label matcher %q: want label=\"value\"", s))
		}
		if u, err := strconv.Unquote(v); err == nil {
			v = u
		}
		want[k] = v
	}
	fam, value := m[name], sampleValue
	if fam == nil {
		for suffix, v := range map[string]func(*dto.Metric) float64{"_count": sampleCount, "_sum": sampleSum} {
			base, ok := strings.CutSuffix(name, suffix)
			if t := m[base].GetType(); ok && (t == dto.MetricType_SUMMARY || t == dto.MetricType_HISTOGRAM) {
				fam, value = m[base], v
			}
		}
	}
	if fam == nil {
		return 0, false
	}
	for _, s := range fam.GetMetric() {
		if labelsMatch(s, want) {
			sum += value(s)
			found = true
		}
	}
	return sum, found
}

func labelsMatch(s *dto.Metric, want map[string]string) bool {
	matched := 0
	for _, l := range s.GetLabel() {
		if v, ok := want[l.GetName()]; ok {
			if v != l.GetValue() {
				return false
			}
			matched++
		}
	}
	return matched == len(want)
}

// sampleValue is a counter's, gauge's or untyped sample's value.
func sampleValue(s *dto.Metric) float64 {
	switch {
	case s.Counter != nil:
		return s.Counter.GetValue()
	case s.Gauge != nil:
		return s.Gauge.GetValue()
	default:
		return s.GetUntyped().GetValue()
	}
}

// sampleCount is a summary's or histogram's count of observations.
func sampleCount(s *dto.Metric) float64 {
	if s.Summary != nil {
		return float64(s.Summary.GetSampleCount())
	}
	return float64(s.GetHistogram().GetSampleCount())
}

// sampleSum is a summary's or histogram's sum of observations.
func sampleSum(s *dto.Metric) float64 {
	if s.Summary != nil {
		return s.Summary.GetSampleSum()
	}
	return s.GetHistogram().GetSampleSum()
}
