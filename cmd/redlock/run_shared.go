//go:build unix

package main

import (
	"errors"
)

func (o *runOptions) validateShared() error {
	if o.Shared && o.Fencing {
		return errors.New("--shared with --fencing: fencing tokens order exclusive holders, and readers share the lock; drop one of them")
	}
	return nil
}
