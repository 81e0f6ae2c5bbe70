package dispatch

import (
	"context"
	"errors"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// registerServerMetrics exports the health and counts of the ClickHouse
// servers (sink.Servers) as observable instruments, read at every
// collection: whether each is up, its batches by the class of the answer
// and the bytes sent to it.
func (m *Manager) registerServerMetrics(mp metric.MeterProvider) error {
	meter := mp.Meter("chute/dispatch")
	up, err1 := meter.Int64ObservableGauge("chute.clickhouse.server.up",
		metric.WithDescription("1 when the ClickHouse server takes batches, 0 while it is passed over after a transient failure, by server (host:port)."))
	batches, err2 := meter.Int64ObservableCounter("chute.clickhouse.server.batches",
		metric.WithDescription("Insert requests sent to a ClickHouse server, by server and outcome of the answer (ok, transient, data, config)."))
	sent, err3 := meter.Int64ObservableCounter("chute.clickhouse.server.sent", metric.WithUnit("By"),
		metric.WithDescription("Bytes of insert bodies sent to a ClickHouse server as they went on the wire (compressed), by server."))
	if err := errors.Join(err1, err2, err3); err != nil {
		return err
	}
	_, err := meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		for _, st := range m.servers.State() {
			server := attribute.String("server", st.Server)
			v := int64(0)
			if st.Up {
				v = 1
			}
			o.ObserveInt64(up, v, metric.WithAttributes(server))
			o.ObserveInt64(sent, int64(st.WireBytes), metric.WithAttributes(server))
			for outcome, n := range st.Batches {
				o.ObserveInt64(batches, int64(n), metric.WithAttributes(server, attribute.String("outcome", outcome)))
			}
		}
		return nil
	}, up, batches, sent)
	return err
}
