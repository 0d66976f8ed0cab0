package actors

// testNodeHook, when set (tests only; nil in production), runs as a node
// starts to handle a message that carries work it owes an answer for: a
// returned batch, a wake-up, a drain, an INFO result. A test makes it panic
// to restart the node on the real path (restart_test.go).
var testNodeHook func(n *node, msg any)

// handling is where a node starts on such a message.
func (n *node) handling(msg any) {
	if testNodeHook != nil {
		testNodeHook(n, msg)
	}
}
