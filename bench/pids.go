package bench

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"time"
)

// LocalPids returns the process ids of the Redis servers at addrs (INFO
// server's process_id), for ReadMachine. It returns nil unless every
// address is a loopback one that answers: a remote server's pid means
// nothing here.
func LocalPids(addrs []string) []int {
	pids := make([]int, 0, len(addrs))
	for _, a := range addrs {
		host, _, err := net.SplitHostPort(a)
		if err != nil {
			return nil
		}
		if ip := net.ParseIP(host); (ip == nil && host != "localhost") || (ip != nil && !ip.IsLoopback()) {
			return nil
		}
		pid, err := serverPid(a)
		if err != nil {
			return nil
		}
		pids = append(pids, pid)
	}
	return pids
}

// serverPid asks the server at addr for its process id, in plain RESP (no
// AUTH: the benchmarks' servers have none).
func serverPid(addr string) (int, error) {
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := io.WriteString(c, "*2\r\n$4\r\nINFO\r\n$6\r\nserver\r\n"); err != nil {
		return 0, err
	}
	r := bufio.NewReader(c)
	head, err := r.ReadString('\n')
	if err != nil {
		return 0, err
	}
	if !strings.HasPrefix(head, "$") {
		return 0, fmt.Errorf("INFO server: %q", strings.TrimSpace(head))
	}
	n, err := strconv.Atoi(strings.TrimSpace(head[1:]))
	if err != nil || n < 0 {
		return 0, fmt.Errorf("INFO server: %q", strings.TrimSpace(head))
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(r, body); err != nil {
		return 0, err
	}
	for line := range strings.Lines(string(body)) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "process_id:"); ok {
			return strconv.Atoi(v)
		}
	}
	return 0, fmt.Errorf("INFO server of %s has no process_id", addr)
}
