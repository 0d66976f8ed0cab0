package redis

// Test instrumentation, set only by this package's tests before they dial
// (the go statement that starts a reader orders the write before its reads).
// A CPU-starved client cannot be produced on demand, but its symptom can: a
// reader that does not run while its reply waits in the socket.
var (
	// testReaderHook runs on a pipe's reader before it waits for a reply.
	testReaderHook func(*pipe)
	// testReadHook runs on a pipe's reader before each read(2) from the
	// socket. A test that waits there for the socket to become readable
	// (see awaitBytes) holds the reader at a point it cannot have passed.
	testReadHook func(*pipe)
	// testLateHook runs when a batch whose context ended finds its reply
	// waiting in the socket, unread, and waits for the reader.
	testLateHook func()
	// testLateTick runs each time such a batch, still waiting, checks
	// whether the reader has caught up.
	testLateTick func()
)
