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
// model's full text.
func progressPrinter(w io.Writer) func(task.Event) {
	var mu sync.Mutex
	return func(ev task.Event) {
		line := progressLine(ev)
		if line == "" {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintf(w, "%7s  %s\n", time.Duration(ev.Elapsed).Round(100*time.Millisecond), line)
	}
}

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
		return ""
	case task.EventCheckpoint, task.EventRollback, task.EventLimit, task.EventLog:
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
