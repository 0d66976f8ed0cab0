package faulty

import (
	"context"
	"fmt"

	"github.com/quorumlock/redlock/transport"
)

// innerDo sends a batch to the wrapped transport: through DoServed when
// served is not nil (a sharded view's batch), else through Do.
func (t *Transport) innerDo(ctx context.Context, ops []transport.Op, results []transport.Result, served []transport.Served) error {
	if served == nil {
		return t.inner.Do(ctx, ops, results)
	}
	return t.inner.(transport.ShardReporter).DoServed(ctx, ops, results, served)
}

// Sharded is a view of t (see View) that is also a
// transport.ShardReporter, delegating to the wrapped transport through the
// faults, when the wrapped transport is one (a Redis Cluster); otherwise it
// is View. *Transport itself never is a ShardReporter: the engine would
// quarantine a wrapped single server per shard, which it has not.
func (t *Transport) Sharded() transport.Transport {
	if _, ok := t.inner.(transport.ShardReporter); !ok {
		return t.View()
	}
	return sharded{t}
}

// sharded embeds the wrapper, so it keeps its ServerReporter, Namer and
// Capabilities, and adds the shard reports.
type sharded struct{ *Transport }

// DoServed is Do, through the faults, reporting the serving shards of the
// ops the wrapped transport was sent. An op the faults failed before it
// was sent is served by no shard; a reply lost after the fact keeps the
// shard that applied the op, as the engine's vetting of it is moot (the
// result is an error).
func (s sharded) DoServed(ctx context.Context, ops []transport.Op, results []transport.Result, served []transport.Served) error {
	if len(served) != len(ops) {
		err := fmt.Errorf("%w: %d ops but %d served", transport.ErrInvalidOp, len(ops), len(served))
		return transport.Fail(results[:min(len(ops), len(results))], err)
	}
	clear(served)
	return s.do(ctx, ops, results, served)
}

func (s sharded) ShardNames() []string { return s.inner.(transport.ShardReporter).ShardNames() }

func (s sharded) ShardEpoch(shard string) uint64 {
	return s.inner.(transport.ShardReporter).ShardEpoch(shard)
}

func (s sharded) Handoffs(shard string) uint64 {
	return s.inner.(transport.ShardReporter).Handoffs(shard)
}

// ShardInfo goes through the faults, as ServerInfo does.
func (s sharded) ShardInfo(ctx context.Context, shard string) (transport.ServerInfo, error) {
	if err := s.gate(ctx); err != nil {
		return transport.ServerInfo{}, err
	}
	return s.inner.(transport.ShardReporter).ShardInfo(ctx, shard)
}

var _ transport.ShardReporter = sharded{}
