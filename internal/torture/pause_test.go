package torture

import (
	"bytes"
	"context"
	"runtime"
	"strings"
	"testing"
	"time"
)

func TestValidateClientPause(t *testing.T) {
	c := DefaultConfig()
	c.Faults = []string{ClientPause}
	err := c.Validate()
	want := "no worker command"
	if runtime.GOOS != "linux" {
		want = "needs Linux"
	}
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("client-pause without a worker command: %v, want it to say %q", err, want)
	}
	c.Faults = []string{Kill}
	if err := c.Validate(); err != nil {
		t.Fatalf("no client-pause, no worker command: %v", err)
	}
}

func TestWorkerCommandLine(t *testing.T) {
	wc := workerConfig{id: 2, masters: []string{"a:1", "b:2"}, resource: "r:3", keys: []string{"k1", "k2"}, clients: 3,
		ttl: time.Second, masterTimeout: 50 * time.Millisecond, quarantine: 0, fencing: false, seed: 9, work: time.Millisecond}
	got, err := parseWorker(wc.args(), &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if got.id != 2 || strings.Join(got.masters, ",") != "a:1,b:2" || got.resource != "r:3" || len(got.keys) != 2 ||
		got.clients != 3 || got.ttl != time.Second || got.masterTimeout != 50*time.Millisecond || got.quarantine != 0 ||
		got.fencing || got.seed != 9 || got.work != time.Millisecond {
		t.Fatalf("round trip: %+v, want %+v", *got, wc)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-keys", "k", "-resource", "r:1"}, "required"},
		{append(wc.args(), "-clients", "0"), "-clients 0"},
		{append(wc.args(), "extra"), `unexpected argument "extra"`},
		{[]string{"-ttl", "soon"}, "invalid value"},
	} {
		var stderr bytes.Buffer
		if code := WorkerMain(context.Background(), tc.args, strings.NewReader(""), &bytes.Buffer{}, &stderr); code != 2 || !strings.Contains(stderr.String(), tc.want) {
			t.Errorf("WorkerMain %q: exit %d, stderr %q; want 2 and %q", tc.args, code, stderr.String(), tc.want)
		}
	}
}
