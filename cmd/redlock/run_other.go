//go:build unix && !linux

package main

import "syscall"

// dieWithParent: only Linux has a parent-death signal; elsewhere a killed
// run leaves its command running until it exits.
func dieWithParent(*syscall.SysProcAttr) {}
