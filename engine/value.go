package engine

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/binary"
	"sync/atomic"
)

// values draws an engine's lock values: block n is AES-128 under a key of
// 128 bits from crypto/rand, drawn once per engine, of a 64-bit random
// nonce and the counter n (the output blocks of a CTR-mode generator).
// crypto/rand per lock cost about 90 ns at 256 lockers (2 % of a cycle on
// the memory masters, BENCHMARKS.md "In-memory masters, round 5"); a block
// costs a tenth of that.
//
// What the design note asks of a value (/work/shared/design.md, "One
// master") still holds. Unique: within an engine AES is a permutation, so
// distinct counters give distinct values, and the counter does not wrap
// (2^64 locks); across engines the keys are independent, so two values
// meet with the probability of two crypto/rand draws, 2^-128. Unguessable:
// without the key, a value, even knowing every other value the engine
// gave, is as hard to guess as a random 128-bit string (AES as a
// pseudorandom permutation), which is more than the design note's
// "128-bit random prefix plus a counter" asks: there, one value seen on a
// master gives away the next.
type values struct {
	block cipher.Block // read-only after aes.NewCipher: safe for concurrent Encrypt
	nonce uint64
	n     atomic.Uint64
}

func newValues() *values {
	var k [24]byte
	_, _ = rand.Read(k[:]) // crypto/rand.Read never fails on supported platforms
	b, err := aes.NewCipher(k[:16])
	if err != nil {
		return nil // not for a 16-byte key; newValue falls back to crypto/rand
	}
	return &values{block: b, nonce: binary.LittleEndian.Uint64(k[16:])}
}

// draw fills b with the next value's 16 bytes, using buf, which must
// already live on the heap, as the block's buffer: a stack array handed to
// the interface's Encrypt would escape, one allocation per lock.
func (v *values) draw(b *[16]byte, buf []byte) {
	binary.LittleEndian.PutUint64(buf[:8], v.nonce)
	binary.LittleEndian.PutUint64(buf[8:16], v.n.Add(1))
	v.block.Encrypt(buf[:16], buf[:16])
	copy(b[:], buf[:16])
}
