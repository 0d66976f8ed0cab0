//go:build !linux

package main

import "syscall"

// redisSysProcAttr: elsewhere, bench stops the servers it started on every
// way out it controls (the end of the run, Ctrl-C, an error).
func redisSysProcAttr() *syscall.SysProcAttr { return nil }
