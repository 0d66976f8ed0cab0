package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/quorumlock/redlock/internal/history"
	"github.com/quorumlock/redlock/internal/torture"
)

// The text report lists starved overruns apart from violations, with how
// late the holder woke; none, nothing.
func TestPrintTortureStarved(t *testing.T) {
	v := history.Violation{Kind: history.StarvedOverrun, Key: "torture:1",
		Detail: "e1/c2 ran until 130.000ms, 30.000ms past its validity (100.000ms), the lost-lock signal not fired; its own timer, due at 90.000ms, woke it 40.000ms late"}
	rep := &torture.Report{Starved: torture.Violations{Count: 1, List: []history.Violation{v}}}
	var b bytes.Buffer
	printTorture(&b, rep)
	out := b.String()
	for _, want := range []string{"starved        1 overruns", "STARVED (1 overruns", v.Detail, "no violation"} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
	b.Reset()
	printTorture(&b, &torture.Report{})
	if strings.Contains(b.String(), "STARVED") || strings.Contains(b.String(), "starved ") {
		t.Errorf("starved shown with none:\n%s", b.String())
	}
}
