package redis

import (
	"crypto/tls"
	"net"
)

// testWriteHook runs on a batch's goroutine once it holds the write lock
// and has queued its entry, just before its write (not for a batch that
// collects for a flush). A test that waits there until the batch's
// deadline has passed is the CPU-starved client whose deadline passes
// before its write starts. Set only by this package's tests, before they
// dial.
var testWriteHook func()

// timeoutBreaks reports whether a write of nc that meets its deadline
// leaves nc unusable, even with nothing written: a tls.Conn keeps the
// error for every later write (crypto/tls: "After a Write has timed out,
// the TLS state is corrupt and all future writes will return the same
// error"), and may have put part of a record on the wire. Such a
// connection must go after a write cut at any point; a plain one stays
// after a write that wrote nothing (pipe.write).
func timeoutBreaks(nc net.Conn) bool {
	if h, ok := nc.(*hookConn); ok {
		nc = h.Conn
	}
	_, ok := nc.(*tls.Conn)
	return ok
}
