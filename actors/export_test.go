package actors

// SetTestCoordHook makes a coordinator panic as it starts to handle a call
// for which boom reports true (nil: no hook), for the tests of package
// actors_test that drive the engine (coordrestart_engine_test.go).
func SetTestCoordHook(boom func(kind CallKind, key string) bool) {
	if boom == nil {
		testCoordHook = nil
		return
	}
	testCoordHook = func(_ *coordinator, msg any) {
		if call, ok := msg.(*Call); ok && boom(call.Kind, call.Key) {
			panic(errCoordBoom)
		}
	}
}

// ErrCoordBoom is what SetTestCoordHook's panics panic with.
var ErrCoordBoom = errCoordBoom
