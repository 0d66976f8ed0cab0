// Command relscript measures what a redis-server spends, in CPU, per
// released lock key under different ways of sending the release (issue 13,
// branch rel19): the standard compare-and-delete script as one EVALSHA per
// key, or one EVALSHA (or FCALL) comparing and deleting K keys, each with
// its own value. mget-mask is the transport's ReleaseBatchScript (one MGET,
// one DEL, bitmask reply); evalsha-mask is rel19's (a GET per key through
// pcall), mask-call the same with call. With -extend it also measures
// ExtendScript per key (extend-1) against ExtendBatchScript (extend-mget-K)
// and rel19's GET per key (extend-mask-K).
//
// It starts one redis-server of its own (internal/redisproc), and for each
// mode and round: SETs N keys (not counted), reads the server's CPU, sends
// the N releases pipelined, WINDOW keys per write and all replies read
// before the next write (as a node sends a batch and waits for it), then
// reads the server's CPU again. CPU is the server's used_cpu_user +
// used_cpu_sys from INFO (getrusage, microseconds), and, as a check, from
// /proc/<pid>/stat (10 ms ticks). Every reply is checked: each release must
// report its key deleted.
//
//	go run ./bench/relscript -n 200000 -rounds 5 -window 64 -k 8,32,48
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/quorumlock/redlock/internal/redisproc"
	redisx "github.com/quorumlock/redlock/transport/redis"
)

const (
	// single is the transport's release script for one key.
	single = redisx.ReleaseScript
	// mgetMask and extendMget are the transport's ReleaseBatchScript and
	// ExtendBatchScript: one MGET for the K keys, then one DEL (or a
	// PEXPIRE per match), a bitmask reply (branch mget20).
	mgetMask   = redisx.ReleaseBatchScript
	extendMget = redisx.ExtendBatchScript
	// batchMask and extendMask are what rel19 shipped: a GET per key
	// through pcall, then DEL (or PEXPIRE), a bitmask reply.
	batchMask  = `local m, b = 0, 1 for i = 1, #KEYS do if redis.pcall("get",KEYS[i]) == ARGV[i] then redis.call("del",KEYS[i]) m = m + b end b = b * 2 end return m`
	extendMask = `local m, b, n = 0, 1, #KEYS for i = 1, n do if redis.pcall("get",KEYS[i]) == ARGV[i] then redis.call("pexpire",KEYS[i],ARGV[n+i]) m = m + b end b = b * 2 end return m`
	// batchArray: the reply is an array of 1 (deleted) or 0 per key.
	batchArray = `local r = {} for i = 1, #KEYS do if redis.call("get",KEYS[i]) == ARGV[i] then r[i] = redis.call("del",KEYS[i]) else r[i] = 0 end end return r`
	// batchCall is batchMask with call instead of pcall for GET, to show
	// what pcall costs.
	batchCall = `local m, b = 0, 1 for i = 1, #KEYS do if redis.call("get",KEYS[i]) == ARGV[i] then redis.call("del",KEYS[i]) m = m + b end b = b * 2 end return m`
	library   = "#!lua name=relscript\n" +
		`redis.register_function('relarr', function(KEYS, ARGV) ` + batchArray + ` end) ` +
		`redis.register_function('relmask', function(KEYS, ARGV) ` + batchMask + ` end)`
)

type mode struct {
	name string
	k    int    // keys per command
	cmd  string // EVALSHA or FCALL
	fn   string // sha or function name
	mask bool   // the reply is a bitmask integer, else :1 per key or an array
	ext  bool   // extends (compare-then-PEXPIRE), not releases
}

func main() {
	n := flag.Int("n", 200000, "releases per round")
	rounds := flag.Int("rounds", 5, "rounds per mode (modes alternate)")
	window := flag.Int("window", 64, "keys released per write (pipelined), all replies read before the next")
	ks := flag.String("k", "8,32,64", "keys per batched command")
	fcall := flag.Bool("fcall", true, "also measure FCALL (Redis 7 functions)")
	extend := flag.Bool("extend", false, "also measure extends: ExtendScript per key against ExtendBatchScript")
	flag.Parse()
	if err := run(*n, *rounds, *window, *ks, *fcall, *extend); err != nil {
		fmt.Fprintln(os.Stderr, "relscript:", err)
		os.Exit(1)
	}
}

func run(n, rounds, window int, ks string, fcall, extend bool) error {
	ctx := context.Background()
	servers, err := redisproc.Start(ctx, 1)
	if err != nil {
		return err
	}
	defer redisproc.StopAll(servers)
	s := servers[0]
	conn, err := net.Dial("tcp", s.Addr)
	if err != nil {
		return err
	}
	defer conn.Close()
	c := &client{w: bufio.NewWriterSize(conn, 1<<16), r: bufio.NewReaderSize(conn, 1<<16)}

	shas := map[string]string{}
	for _, src := range []string{single, batchArray, batchMask, batchCall, mgetMask, extendMask, extendMget, redisx.ExtendScript} {
		v, err := c.do("SCRIPT", "LOAD", src)
		if err != nil {
			return err
		}
		shas[src] = v
	}
	modes := []mode{{name: "evalsha-1", k: 1, cmd: "EVALSHA", fn: shas[single]}}
	if extend {
		modes = append(modes, mode{name: "extend-1", k: 1, cmd: "EVALSHA", fn: shas[redisx.ExtendScript], ext: true})
	}
	if fcall {
		if _, err := c.do("FUNCTION", "LOAD", "REPLACE", library); err != nil {
			return err
		}
	}
	for _, f := range strings.Split(ks, ",") {
		k, err := strconv.Atoi(f)
		if err != nil || k < 1 || k > 1000 {
			return fmt.Errorf("bad -k %q: want 1..1000", f)
		}
		modes = append(modes, mode{name: "evalsha-arr-" + f, k: k, cmd: "EVALSHA", fn: shas[batchArray]})
		if extend && k <= redisx.MaxCoalesce {
			modes = append(modes,
				mode{name: "extend-mask-" + f, k: k, cmd: "EVALSHA", fn: shas[extendMask], mask: true, ext: true},
				mode{name: "extend-mget-" + f, k: k, cmd: "EVALSHA", fn: shas[extendMget], mask: true, ext: true})
		}
		if k <= redisx.MaxCoalesce { // a Lua number holds 52 bits exactly
			modes = append(modes,
				mode{name: "evalsha-mask-" + f, k: k, cmd: "EVALSHA", fn: shas[batchMask], mask: true},
				mode{name: "mask-call-" + f, k: k, cmd: "EVALSHA", fn: shas[batchCall], mask: true},
				mode{name: "mget-mask-" + f, k: k, cmd: "EVALSHA", fn: shas[mgetMask], mask: true})
		}
		if fcall {
			modes = append(modes, mode{name: "fcall-arr-" + f, k: k, cmd: "FCALL", fn: "relarr"})
		}
	}
	fmt.Printf("redis-server pid %d, %d releases per round, %d keys per write, %d rounds\n", s.Pid(), n, window, rounds)
	res := map[string][]float64{}
	resTick := map[string][]float64{}
	for r := 0; r < rounds; r++ {
		for _, m := range modes {
			us, tick, err := c.round(s.Pid(), m, n, window)
			if err != nil {
				return fmt.Errorf("%s: %w", m.name, err)
			}
			res[m.name] = append(res[m.name], us)
			resTick[m.name] = append(resTick[m.name], tick)
		}
	}
	base := median(res["evalsha-1"])
	fmt.Printf("%-18s %14s %14s %10s  %s\n", "mode", "us/release", "us/rel(/proc)", "vs single", "rounds (INFO)")
	for _, m := range modes {
		med := median(res[m.name])
		fmt.Printf("%-18s %14.3f %14.3f %10.3f  %s\n", m.name, med, median(resTick[m.name]), med/base, fmtAll(res[m.name]))
	}
	return nil
}

func (c *client) round(pid int, m mode, n, window int) (us, tick float64, err error) {
	window = max(window/m.k*m.k, m.k)
	n = n / window * window
	val := "v" + strconv.FormatInt(time.Now().UnixNano(), 36) + m.name
	// SET the keys, pipelined, not counted.
	for i := 0; i < n; i += window {
		for j := i; j < i+window; j++ {
			c.cmd("SET", key(j), val, "PX", "600000")
		}
		if err := c.flushRead(window, "+OK"); err != nil {
			return 0, 0, err
		}
	}
	cpu0, err := c.infoCPU()
	if err != nil {
		return 0, 0, err
	}
	t0, err := procCPU(pid)
	if err != nil {
		return 0, 0, err
	}
	args := make([]string, 0, 3+2*m.k)
	for i := 0; i < n; i += window {
		for j := i; j < i+window; j += m.k {
			args = append(args[:0], m.cmd, m.fn, strconv.Itoa(m.k))
			for x := j; x < j+m.k; x++ {
				args = append(args, key(x))
			}
			for range m.k {
				args = append(args, val)
			}
			if m.ext {
				for range m.k {
					args = append(args, "600000")
				}
			}
			c.cmd(args...)
		}
		if err := c.flushReplies(window/m.k, m); err != nil {
			return 0, 0, err
		}
	}
	t1, err := procCPU(pid)
	if err != nil {
		return 0, 0, err
	}
	cpu1, err := c.infoCPU()
	if err != nil {
		return 0, 0, err
	}
	if m.ext {
		if v, err := c.do("DBSIZE"); err != nil || v != strconv.Itoa(n) {
			return 0, 0, fmt.Errorf("DBSIZE after the extends: %q %v", v, err)
		}
		if _, err := c.do("FLUSHALL"); err != nil {
			return 0, 0, err
		}
	} else if v, err := c.do("DBSIZE"); err != nil || v != "0" {
		return 0, 0, fmt.Errorf("DBSIZE after the releases: %q %v", v, err)
	}
	return (cpu1 - cpu0) / float64(n), (t1 - t0) / float64(n), nil
}

func key(i int) string { return "relscript:" + strconv.Itoa(i) }

type client struct {
	w *bufio.Writer
	r *bufio.Reader
}

func (c *client) cmd(args ...string) {
	fmt.Fprintf(c.w, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(c.w, "$%d\r\n%s\r\n", len(a), a)
	}
}

func (c *client) do(args ...string) (string, error) {
	c.cmd(args...)
	if err := c.w.Flush(); err != nil {
		return "", err
	}
	return c.readOne()
}

// readOne reads a simple reply (status, integer, bulk) as text.
func (c *client) readOne() (string, error) {
	line, err := c.line()
	if err != nil {
		return "", err
	}
	switch line[0] {
	case '+', ':':
		return line[1:], nil
	case '-':
		return "", errors.New(line[1:])
	case '$':
		n, _ := strconv.Atoi(line[1:])
		buf := make([]byte, n+2)
		if _, err := ioReadFull(c.r, buf); err != nil {
			return "", err
		}
		return string(buf[:n]), nil
	}
	return "", fmt.Errorf("unexpected reply %q", line)
}

func (c *client) line() (string, error) {
	s, err := c.r.ReadString('\n')
	if err != nil {
		return "", err
	}
	return strings.TrimSuffix(s, "\r\n"), nil
}

func (c *client) flushRead(n int, want string) error {
	if err := c.w.Flush(); err != nil {
		return err
	}
	for range n {
		l, err := c.line()
		if err != nil {
			return err
		}
		if l != want {
			return fmt.Errorf("reply %q, want %q", l, want)
		}
	}
	return nil
}

// flushReplies reads n replies of mode m, each of which must say that all
// its keys were deleted.
func (c *client) flushReplies(n int, m mode) error {
	if err := c.w.Flush(); err != nil {
		return err
	}
	for range n {
		l, err := c.line()
		if err != nil {
			return err
		}
		switch {
		case m.k == 1:
			if l != ":1" {
				return fmt.Errorf("reply %q, want :1", l)
			}
		case m.mask:
			if l != ":"+strconv.FormatInt(1<<m.k-1, 10) {
				return fmt.Errorf("reply %q, want all %d bits", l, m.k)
			}
		default:
			if l != "*"+strconv.Itoa(m.k) {
				return fmt.Errorf("reply %q, want an array of %d", l, m.k)
			}
			for range m.k {
				if l, err = c.line(); err != nil {
					return err
				} else if l != ":1" {
					return fmt.Errorf("element %q, want :1", l)
				}
			}
		}
	}
	return nil
}

func (c *client) infoCPU() (float64, error) {
	v, err := c.do("INFO", "cpu")
	if err != nil {
		return 0, err
	}
	var sum float64
	for _, l := range strings.Split(v, "\r\n") {
		for _, f := range []string{"used_cpu_user:", "used_cpu_sys:"} {
			if rest, ok := strings.CutPrefix(l, f); ok {
				x, err := strconv.ParseFloat(rest, 64)
				if err != nil {
					return 0, err
				}
				sum += x
			}
		}
	}
	return sum * 1e6, nil
}

// procCPU is utime+stime of pid in microseconds (assumes 100 ticks/s).
func procCPU(pid int) (float64, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	u, _ := strconv.ParseFloat(f[11], 64)
	st, _ := strconv.ParseFloat(f[12], 64)
	return (u + st) * 1e4, nil
}

func ioReadFull(r *bufio.Reader, buf []byte) (int, error) {
	n := 0
	for n < len(buf) {
		k, err := r.Read(buf[n:])
		n += k
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

func median(x []float64) float64 {
	y := append([]float64(nil), x...)
	sort.Float64s(y)
	if len(y) == 0 {
		return 0
	}
	if len(y)%2 == 1 {
		return y[len(y)/2]
	}
	return (y[len(y)/2-1] + y[len(y)/2]) / 2
}

func fmtAll(x []float64) string {
	s := make([]string, len(x))
	for i, v := range x {
		s[i] = strconv.FormatFloat(v, 'f', 3, 64)
	}
	return strings.Join(s, " ")
}
