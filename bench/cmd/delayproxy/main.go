// Command delayproxy puts a fault proxy (internal/faultproxy) with a fixed
// one-way delay in front of each Redis address given, in a process of its
// own, so that the proxies' CPU is not counted as a benchmarked client's.
// It prints the proxies' addresses, comma-separated, on one line in the
// order given, then serves until it is killed. bench/scale.sh uses it for
// the round-trip-time table:
//
//	delayproxy -delay 250us 127.0.0.1:7001 127.0.0.1:7002 ...
//
// A round trip pays the delay twice (request and reply), so -delay 250us
// adds 0.5ms to every round trip.
package main

import (
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/quorumlock/redlock/internal/faultproxy"
)

func main() {
	delay := flag.Duration("delay", 0, "one-way delay added to every chunk in each direction")
	flag.Parse()
	if flag.NArg() == 0 || *delay < 0 {
		fmt.Fprintln(os.Stderr, "usage: delayproxy -delay D host:port...")
		os.Exit(2)
	}
	addrs := make([]string, flag.NArg())
	for i, target := range flag.Args() {
		p, err := faultproxy.New(target)
		if err != nil {
			fmt.Fprintf(os.Stderr, "delayproxy: %s: %v\n", target, err)
			os.Exit(1)
		}
		defer p.Close()
		p.SetDelay(*delay)
		addrs[i] = p.Addr()
	}
	fmt.Println(strings.Join(addrs, ","))
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	<-sig
}
