package main

import (
	"context"
	"fmt"
	"sort"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/quorumlock/redlock/api"
	"github.com/quorumlock/redlock/engine"
)

// waitWatch gives run's engine a meter provider of its own, read when the
// wait for the lock passes a second, to say what it waits for: the engine's
// own metrics (OBSERVABILITY.md) know which masters are in quarantine,
// which answer, which may vote, and whether they refused.
type waitWatch struct {
	reader *sdkmetric.ManualReader
	mp     *sdkmetric.MeterProvider
}

// waitNotice is how long run waits in silence before it says why.
const waitNotice = time.Second

func newWaitWatch() *waitWatch {
	r := sdkmetric.NewManualReader()
	return &waitWatch{reader: r, mp: sdkmetric.NewMeterProvider(sdkmetric.WithReader(r))}
}

func (w *waitWatch) option() api.Option { return api.WithMeterProvider(w.mp) }

func (w *waitWatch) close() { _ = w.mp.Shutdown(context.Background()) }

// explain says in a few words what the lock waits for.
func (w *waitWatch) explain(eng *engine.Engine) string {
	var rm metricdata.ResourceMetrics
	if err := w.reader.Collect(context.Background(), &rm); err != nil {
		return ""
	}
	n, quorum := len(eng.Masters()), eng.Quorum()
	var left []float64 // remaining quarantine of each master in it
	reachable, votes, refused := 0, 0, int64(0)
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			switch d := m.Data.(type) {
			case metricdata.Gauge[float64]:
				if m.Name == "redlock.master.quarantine.remaining" {
					for _, p := range d.DataPoints {
						if p.Value > 0 {
							left = append(left, p.Value)
						}
					}
				}
			case metricdata.Gauge[int64]:
				switch m.Name {
				case "redlock.master.reachable":
					for _, p := range d.DataPoints {
						reachable += int(p.Value)
					}
				case "redlock.master.voting":
					for _, p := range d.DataPoints {
						votes += int(p.Value)
					}
				}
			case metricdata.Sum[int64]:
				if m.Name == "redlock.master.ops" {
					for _, p := range d.DataPoints {
						op, _ := p.Attributes.Value(attribute.Key("redlock.op"))
						res, _ := p.Attributes.Value(attribute.Key("redlock.result"))
						if res.AsString() == "refused" && op.AsString() != "release" {
							refused += p.Value
						}
					}
				}
			}
		}
	}
	if voting := n - len(left); voting < quorum {
		// A quorum votes once the quarantines that end first have ended.
		sort.Float64s(left)
		wait := time.Duration(left[quorum-voting-1] * float64(time.Second)).Round(100 * time.Millisecond)
		return fmt.Sprintf("%d of %d masters in restart quarantine for %v more (%d must vote)", len(left), n, wait, quorum)
	}
	if reachable < quorum {
		return fmt.Sprintf("only %d of %d masters reachable, %d needed; retrying", reachable, n, quorum)
	}
	if votes < quorum {
		// They answer, but something keeps them from voting: an unsafe
		// configuration, or a server check they refuse.
		return fmt.Sprintf("only %d of %d masters can vote, %d needed: the others answer but are unsafe or cannot be checked (redlock status says why); retrying", votes, n, quorum)
	}
	if refused > 0 {
		return "held by someone else, waiting"
	}
	return "no quorum answered yet; retrying"
}
