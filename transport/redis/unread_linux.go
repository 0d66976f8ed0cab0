package redis

import (
	"syscall"
	"unsafe"
)

// rawConn is the file descriptor under p's connection, if it has one (not
// through TLS: what waits there is not visible below the record layer).
func (p *pipe) rawConn() (syscall.RawConn, bool) {
	nc := p.nc
	if h, ok := nc.(*hookConn); ok {
		nc = h.Conn
	}
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return nil, false
	}
	rc, err := sc.SyscallConn()
	return rc, err == nil
}

// unread is how many bytes from the master wait in the socket, unread
// (FIONREAD; 0 when it cannot tell).
func (p *pipe) unread() int {
	rc, ok := p.rawConn()
	if !ok {
		return 0
	}
	var n int32
	var errno syscall.Errno
	if err := rc.Control(func(fd uintptr) {
		_, _, errno = syscall.Syscall(syscall.SYS_IOCTL, fd, syscall.TIOCINQ, uintptr(unsafe.Pointer(&n)))
	}); err != nil || errno != 0 {
		return 0
	}
	return int(n)
}
