package api

import (
	"errors"
	"fmt"
)

// ErrInternal: the engine hit a bug of its own (one of its actors
// panicked) while it ran the operation, so the operation's outcome on the
// masters is unknown. The engine answers rather than leaving the caller
// waiting, releases on every master whatever an acquire may have taken,
// and keeps running for other calls. A lock whose extension fails with it
// is given up (its Done closes, and its Err, ErrNotHeld, tells of it). The
// error's chain (Extend's error; for an auto-extension, the message of
// Lock.Err) holds a *PanicError with the value the actor panicked with:
// please report it, with the stack the engine logs at error level.
var ErrInternal = errors.New("internal error: the engine hit a bug")

// PanicError is the cause of an ErrInternal: which actor panicked, and
// with what. errors.Is(err, ErrInternal) holds for it, and so does
// errors.Is and errors.As for the panic value when that is an error.
type PanicError struct {
	Actor string // e.g. "coordinator 0"
	Value any    // what the actor panicked with
}

func (e *PanicError) Error() string {
	return fmt.Sprintf("%s: %s panicked: %v", ErrInternal.Error(), e.Actor, e.Value)
}

// Unwrap gives ErrInternal and, if the panic value is an error, that too.
func (e *PanicError) Unwrap() []error {
	if err, ok := e.Value.(error); ok {
		return []error{ErrInternal, err}
	}
	return []error{ErrInternal}
}
