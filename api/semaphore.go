package api

import "strconv"

// MaxPermits is the most permits a semaphore may have. An attempt that
// finds the semaphore nearly full tries every slot, so the cost of a
// refused attempt grows with the permits on every master.
const MaxPermits = 256

// SemaphorePrefix starts the key of every semaphore slot.
const SemaphorePrefix = "redlock-sem:"

// SemaphoreSlot is the key of slot i (0 <= i < permits) of the semaphore
// name: "redlock-sem:{" + name + "}:" + i. Each slot is an ordinary lock
// key, and a permit is a lock on one slot, so a semaphore of P permits has
// at most P holders by construction (SAFETY.md, "Semaphore: why at most P
// holders"). The braces make the slots of one semaphore one Redis Cluster
// hash slot. A name must be a valid key, and its longest slot key at most
// 1024 bytes: a name of up to 1024-len("redlock-sem:{}:")-3 = 1006 bytes
// always fits.
//
// Taking a slot key with Lock takes that permit; releasing it with a Lock
// of another value is refused like any other lock's.
func SemaphoreSlot(name string, i int) string {
	b := make([]byte, 0, len(SemaphorePrefix)+len(name)+6)
	b = append(b, SemaphorePrefix...)
	b = append(b, '{')
	b = append(b, name...)
	b = append(b, '}', ':')
	b = strconv.AppendInt(b, int64(i), 10)
	return string(b)
}
