package redis

import (
	"syscall"
	"unsafe"
)

// replyWaiting reports whether bytes from the master wait in the socket,
// unread (FIONREAD): the reader is behind, not the master silent.
func (p *pipe) replyWaiting() bool {
	nc := p.nc
	if h, ok := nc.(*hookConn); ok {
		nc = h.Conn
	}
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return false // TLS: what waits is not visible below the record layer
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	var n int32
	var errno syscall.Errno
	if err := rc.Control(func(fd uintptr) {
		_, _, errno = syscall.Syscall(syscall.SYS_IOCTL, fd, syscall.TIOCINQ, uintptr(unsafe.Pointer(&n)))
	}); err != nil || errno != 0 {
		return false
	}
	return n > 0
}
