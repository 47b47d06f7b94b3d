package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/wrenchworks/wrench/task"
)

func cloneProgress(text string) task.Event {
	return task.Event{Kind: task.EventLog, Phase: "clone", Text: text, Elapsed: task.Duration(2 * time.Second)}
}

// TestRunProgressShowsClones: a clone's progress is a line redrawn in
// place on a terminal, and spaced-out plain lines (plus each finished
// stage) otherwise; other lines are unaffected.
func TestRunProgressShowsClones(t *testing.T) {
	events := []task.Event{
		{Kind: task.EventPhase, Phase: "clone", Text: " start"},
		cloneProgress("Counting objects:  10% (1/10)"),
		cloneProgress("Counting objects:  50% (5/10)"),
		cloneProgress("Counting objects: 100% (10/10), done."),
		cloneProgress("Receiving objects:  45% (45/100)"),
		{Kind: task.EventPhase, Phase: "clone", Text: " end"},
		{Kind: task.EventToolResult, Tool: "search_replace", Text: "Edited m.py\n\nDiagnostics for m.py (exit code 1):\nm.py:3:17: SyntaxError: unexpected indent"},
	}
	var plain bytes.Buffer
	p := progressPrinter(&plain, false)
	for _, ev := range events {
		p(ev)
	}
	out := plain.String()
	for _, want := range []string{"· clone: Counting objects: 10% (1/10)\n", "· clone: Counting objects: 100% (10/10), done.\n",
		"· clone end\n", "  ! search_replace: Diagnostics for m.py (exit code 1): m.py:3:17: SyntaxError: unexpected indent\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("plain output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "50%") || strings.Contains(out, "45%") || strings.Contains(out, "\r") {
		t.Errorf("plain output is not spaced out:\n%s", out)
	}

	var live bytes.Buffer
	p = progressPrinter(&live, true)
	for _, ev := range events[:6] {
		p(ev)
	}
	out = live.String()
	for _, want := range []string{"\r\x1b[K     2s  · clone: Counting objects: 50% (5/10)", "\r\x1b[K     2s  · clone: Receiving objects: 45% (45/100)\r\x1b[K     0s  · clone end\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("live output lacks %q:\n%q", want, out)
		}
	}
}
