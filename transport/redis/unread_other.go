//go:build !linux

package redis

// unread: only Linux is asked (FIONREAD); elsewhere only what the reader
// holds in its buffer counts (see send).
func (p *pipe) unread() int { return 0 }
