package main

import (
	"flag"
	"io"
	"slices"
	"testing"
	"time"

	"github.com/wrenchworks/wrench/task"
)

func TestTrackerLine(t *testing.T) {
	created := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	tr := newTracker(task.Status{TaskID: "t-1", State: task.StateQueued, CreatedAt: created})
	for _, ev := range []task.Event{
		{Kind: task.EventState, State: task.StateRunning},
		{Kind: task.EventTurn, Turn: 3},
		{Kind: task.EventUsage, Usage: &task.Usage{InputTokens: 12000, OutputTokens: 300, CostUSD: 0.042}},
		{Kind: task.EventToolCall, Tool: "edit"},
		{Kind: task.EventUsage, Usage: &task.Usage{InputTokens: 100, OutputTokens: 0, CostUSD: 0.001}},
	} {
		tr.add(ev)
	}
	got := tr.line(created.Add(83 * time.Second))
	want := "t-1 running    turn 3   edit              12.4k tok  $0.0430  1m23s"
	if got != want {
		t.Errorf("line\n got %q\nwant %q", got, want)
	}
	tr.add(task.Event{Kind: task.EventResult, Result: &task.Result{Status: task.StateResolved}})
	if tr.state != task.StateResolved {
		t.Errorf("state after result %s", tr.state)
	}
}

func TestTokens(t *testing.T) {
	for n, want := range map[int64]string{0: "0", 999: "999", 1000: "1.0k", 12345: "12.3k", 2_500_000: "2.50M"} {
		if got := tokens(n); got != want {
			t.Errorf("tokens(%d) = %q, want %q", n, got, want)
		}
	}
}

func TestParseArgsInterspersed(t *testing.T) {
	for _, args := range [][]string{
		{"--json", "t-1"},
		{"t-1", "--json"},
		{"--server", "http://x", "t-1", "--json"},
	} {
		fs := flag.NewFlagSet("x", flag.ContinueOnError)
		j := fs.Bool("json", false, "")
		fs.String("server", "", "")
		env := &cliEnv{stdout: io.Discard, stderr: io.Discard, getenv: func(string) string { return "" }}
		pos, code, ok := parseCommand(env, fs, args)
		if !ok || !slices.Equal(pos, []string{"t-1"}) || !*j {
			t.Errorf("%v: pos %v json %v ok %v code %d", args, pos, *j, ok, code)
		}
	}
}
