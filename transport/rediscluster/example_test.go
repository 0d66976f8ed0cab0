package rediscluster_test

import (
	"fmt"

	"github.com/quorumlock/redlock/transport/rediscluster"
)

// A cluster is named by some of its nodes; the slot map is read from them.
func ExampleParseAddr() {
	cfg, err := rediscluster.ParseAddr("rediss+cluster://app:s3cret@10.0.1.1:7000,10.0.1.2?allow-failover=false")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(cfg.Seeds, cfg.Node.TLS, cfg.Node.Username, cfg.AllowFailover)
	// Output: [10.0.1.1:7000 10.0.1.2:6379] true app false
}

// Keys of one lock on a cluster must share a slot: a hash tag does it. A
// fencing counter is named into its key's slot.
func ExampleCheckKeys() {
	fmt.Println(rediscluster.CheckKeys([]string{"{order:42}:items", "{order:42}:payment"}, false))
	fmt.Println(rediscluster.CheckKeys([]string{"order:42:items", "order:42:payment"}, false) != nil)
	fmt.Println(rediscluster.FenceKey("order:42"), rediscluster.FenceKey("{order:42}"))
	// Output:
	// <nil>
	// true
	// redlock-fence{order:42} redlock-fence:{order:42}
}
