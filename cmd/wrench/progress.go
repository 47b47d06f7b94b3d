package main

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/wrenchworks/wrench/task"
)

// progressPrinter returns an event sink that prints one short line per
// phase, tool call and notable event — enough to follow a run, never the
// model's full text. A phase's progress (a clone's "Receiving objects:
// 45%") is one line redrawn in place when live (a terminal); otherwise it
// is printed every plainProgressEvery and when a stage is done.
func progressPrinter(w io.Writer, live bool) func(task.Event) {
	var (
		mu       sync.Mutex
		open     bool // a progress line is on screen, not ended
		lastSeen time.Time
	)
	return func(ev task.Event) {
		line := progressLine(ev)
		if line == "" {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		text := fmt.Sprintf("%7s  %s", time.Duration(ev.Elapsed).Round(100*time.Millisecond), line)
		switch {
		case isPhaseProgress(ev) && live:
			if len(text) > 150 {
				text = text[:150] + "…"
			}
			fmt.Fprintf(w, "\r\x1b[K%s", text)
			open = true
			return
		case isPhaseProgress(ev) && !strings.HasSuffix(ev.Text, "done.") && time.Since(lastSeen) < plainProgressEvery:
			return
		case isPhaseProgress(ev):
			lastSeen = time.Now()
		case open:
			fmt.Fprint(w, "\r\x1b[K")
		}
		open = false
		fmt.Fprintln(w, text)
	}
}

// plainProgressEvery spaces a phase's progress lines off a terminal.
const plainProgressEvery = 10 * time.Second

// isPhaseProgress says whether ev reports a phase's progress (a log event
// of a phase, e.g. a clone's).
func isPhaseProgress(ev task.Event) bool { return ev.Kind == task.EventLog && ev.Phase != "" }

func progressLine(ev task.Event) string {
	switch ev.Kind {
	case task.EventPhase:
		return strings.TrimRight("· "+ev.Phase+" "+strings.TrimSpace(ev.Text), " ")
	case task.EventTurn:
		return fmt.Sprintf("turn %d", ev.Turn)
	case task.EventToolCall:
		return "→ " + ev.Tool + " " + clip(ev.Text, 100)
	case task.EventToolResult:
		if ev.IsError {
			return "  ✗ " + ev.Tool + ": " + clip(ev.Text, 100)
		}
		// A write whose checker complained (the agent's diagnostics).
		if _, diag, ok := strings.Cut(ev.Text, "\n\nDiagnostics for "); ok {
			return "  ! " + ev.Tool + ": " + clip("Diagnostics for "+diag, 100)
		}
		return ""
	case task.EventLog:
		if ev.Phase != "" {
			return "· " + ev.Phase + ": " + clip(ev.Text, 120)
		}
		return string(ev.Kind) + ": " + clip(ev.Text, 120)
	case task.EventCheckpoint, task.EventRollback, task.EventLimit, task.EventResume:
		return string(ev.Kind) + ": " + clip(ev.Text, 120)
	}
	return ""
}

func clip(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}
