package actors

// testCoordHook, when set (tests only; nil in production), runs as a
// coordinator starts to handle any message. A test makes it panic to
// restart the coordinator on the real path (coordrestart_test.go).
var testCoordHook func(c *coordinator, msg any)
