module github.com/quorumlock/redlock/bench/redsync

go 1.26.0

require (
	github.com/go-redsync/redsync/v4 v4.18.1
	github.com/quorumlock/redlock v0.0.0-00010101000000-000000000000
	github.com/redis/go-redis/v9 v9.23.0
)

require (
	github.com/HdrHistogram/hdrhistogram-go v1.2.0 // indirect
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/mediocregopher/radix/v4 v4.1.4 // indirect
	github.com/tilinna/clock v1.0.2 // indirect
	go.opentelemetry.io/otel v1.47.0 // indirect
	go.opentelemetry.io/otel/metric v1.47.0 // indirect
	go.opentelemetry.io/otel/trace v1.47.0 // indirect
	go.uber.org/atomic v1.12.0 // indirect
	golang.org/x/sys v0.48.0 // indirect
)

replace github.com/quorumlock/redlock => ../..
