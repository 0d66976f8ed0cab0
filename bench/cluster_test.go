package bench_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/quorumlock/redlock/api"
	"github.com/quorumlock/redlock/bench"
	"github.com/quorumlock/redlock/bench/benchtest"
	"github.com/quorumlock/redlock/engine"
	"github.com/quorumlock/redlock/internal/redistest"
)

// BenchmarkCluster runs uncontended/c=256 over three masters, each a
// single redis-server ("single"), a Redis Cluster of one shard
// ("shards=1") or of three ("shards=3"), all on this machine:
//
//	go test -run '^$' -bench Cluster -benchtime 20000x -count 3 ./bench
//
// On a machine with a few cores the servers, the client and everything
// else share the CPUs, so shards=3 shows the cluster transport's overhead
// (a batch split three ways: three pipelines per cluster, not one), not
// the capacity that shards on machines of their own add. Besides the
// metrics of benchtest.RunWorkload it reports, summed over every server:
//
//	srv-cpu-us/cycle  server CPU (used_cpu_user + used_cpu_sys) per cycle
//	cmds/cycle        commands the servers processed per cycle
func BenchmarkCluster(b *testing.B) {
	for _, v := range []struct {
		name   string
		shards int // 0: single servers
	}{{"single", 0}, {"shards=1", 1}, {"shards=3", 3}} {
		b.Run(v.name, func(b *testing.B) {
			var servers []*redistest.Server
			addrs := make([]string, 3)
			for i := range addrs {
				if v.shards == 0 {
					s := redistest.Start(b, 1)
					servers = append(servers, s...)
					addrs[i] = s[0].Addr
					continue
				}
				c := redistest.StartCluster(b, v.shards)
				servers = append(servers, c...)
				addrs[i] = "redis+cluster://" + c[0].Addr
			}
			e, err := engine.New(addrs, api.WithoutRestartQuarantine())
			if err != nil {
				b.Fatal(err)
			}
			defer e.Close()
			client := bench.Engine(e)
			prefix := bench.RunPrefix("cluster-" + v.name)
			if err := bench.WaitReady(context.Background(), client, prefix, 10*time.Second, nil); err != nil {
				b.Fatal(err)
			}
			cpu0, cmd0 := serverStats(b, servers)
			benchtest.RunWorkload(b, client, bench.Uncontended(256, prefix))
			cpu1, cmd1 := serverStats(b, servers)
			b.ReportMetric(float64(cpu1-cpu0)/float64(time.Microsecond)/float64(b.N), "srv-cpu-us/cycle")
			b.ReportMetric(float64(cmd1-cmd0)/float64(b.N), "cmds/cycle")
		})
	}
}

// serverStats sums CPU time and commands processed over servers (INFO);
// the INFO calls themselves count a few commands.
func serverStats(b *testing.B, servers []*redistest.Server) (time.Duration, int64) {
	var cpu time.Duration
	var cmds int64
	for _, s := range servers {
		var info string
		s.Do(b, &info, "INFO", "all")
		for line := range strings.Lines(info) {
			k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
			if !ok {
				continue
			}
			switch k {
			case "used_cpu_user", "used_cpu_sys":
				f, _ := strconv.ParseFloat(v, 64)
				cpu += time.Duration(f * float64(time.Second))
			case "total_commands_processed":
				n, _ := strconv.ParseInt(v, 10, 64)
				cmds += n
			}
		}
	}
	return cpu, cmds
}
