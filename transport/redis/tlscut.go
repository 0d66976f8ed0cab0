package redis

// testWriteHook runs on a batch's goroutine once it holds the write lock
// and has queued its entry, just before its write (not for a batch that
// collects for a flush). A test that waits there until the batch's
// deadline has passed is the CPU-starved client whose deadline passes
// before its write starts. Set only by this package's tests, before they
// dial.
var testWriteHook func()
