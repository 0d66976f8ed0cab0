package engine

// ShardOf is the coordinator shard that runs key's calls, for tests that
// need keys in different shards (the hash seed is drawn per process).
func ShardOf(e *Engine, key string) int { return e.cluster.ShardOf(key) }
