//go:build !linux

package redis

// replyWaiting: only Linux is asked (FIONREAD); elsewhere a batch whose
// context ended fails as before.
func (p *pipe) replyWaiting() bool { return false }
