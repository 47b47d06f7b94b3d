package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/wrenchworks/wrench/api"
	"github.com/wrenchworks/wrench/task"
)

// tracker folds a task's events into the figures the progress line shows.
type tracker struct {
	id      string
	state   task.State
	turn    int
	tool    string
	tokens  int64
	cost    float64
	created time.Time
}

func newTracker(st task.Status) *tracker {
	created := st.CreatedAt
	if created.IsZero() {
		created = time.Now()
	}
	return &tracker{id: st.TaskID, state: st.State, created: created}
}

func (t *tracker) add(ev task.Event) {
	switch ev.Kind {
	case task.EventState:
		if ev.State != "" {
			t.state = ev.State
		}
	case task.EventTurn:
		t.turn = max(t.turn, ev.Turn)
		if t.state == task.StateQueued {
			t.state = task.StateRunning
		}
	case task.EventToolCall:
		t.tool = ev.Tool
	case task.EventUsage:
		if u := ev.Usage; u != nil {
			t.tokens += u.InputTokens + u.OutputTokens
			t.cost += u.CostUSD
		}
	case task.EventResult:
		if ev.Result != nil && ev.Result.Status != "" {
			t.state = ev.Result.Status
		} else if ev.State != "" {
			t.state = ev.State
		}
	}
}

// line is the one-line summary: state, turn, last tool, tokens, cost,
// elapsed since submission.
func (t *tracker) line(now time.Time) string {
	return fmt.Sprintf("%s %-10s turn %-3d %-14s %8s tok  $%.4f  %s", t.id, t.state, t.turn, orDash(t.tool),
		tokens(t.tokens), t.cost, now.Sub(t.created).Round(time.Second))
}

// tokens renders a token count compactly: 950, 12.3k, 1.20M.
func tokens(n int64) string {
	switch {
	case n < 1000:
		return fmt.Sprint(n)
	case n < 1_000_000:
		return fmt.Sprintf("%.1fk", float64(n)/1e3)
	}
	return fmt.Sprintf("%.2fM", float64(n)/1e6)
}

// isTerminal reports whether w is a character device a live line can be
// redrawn on.
func isTerminal(w io.Writer, env *cliEnv) bool {
	f, ok := w.(*os.File)
	if !ok || env.getenv("TERM") == "dumb" {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// waitFinal waits until task st is final, showing progress on out when
// follow is set (NDJSON events on stdout with --json; a live line when out
// is a terminal; plain lines otherwise), then prints the outcome on out and
// returns the exit code of the final state, as `wrench run` does. watch
// shows progress on stdout (it is what it prints); submit on stderr (its
// stdout is the task id).
func waitFinal(ctx context.Context, env *cliEnv, out io.Writer, cmd string, cf clientFlags, st task.Status, follow bool) int {
	c := cf.client()
	// Following a final task replays its stored events (the stream ends
	// with the result); merely waiting for one has nothing to do.
	if follow || !st.State.Final() {
		var err error
		switch {
		case follow && cf.jsonOut:
			enc := json.NewEncoder(env.stdout)
			err = c.Events(ctx, st.TaskID, 0, func(ev task.Event) error { return enc.Encode(ev) })
		case follow && isTerminal(out, env):
			err = followLive(ctx, c, out, st)
		case follow:
			tr := newTracker(st)
			err = c.Events(ctx, st.TaskID, 0, func(ev task.Event) error {
				tr.add(ev)
				if d := progressLine(ev); d != "" || ev.Kind == task.EventState || ev.Kind == task.EventResult {
					_, werr := fmt.Fprintf(out, "%s  %s\n", tr.line(time.Now()), d)
					return werr
				}
				return nil
			})
		default:
			err = c.Events(ctx, st.TaskID, 0, func(task.Event) error { return nil })
		}
		if err == nil || (ctx.Err() == nil && !errors.Is(err, api.ErrNotFound) && !errors.Is(err, api.ErrUnauthorized)) {
			// A server may end the stream at a result event sent a moment
			// before the final state is stored (older servers publish the
			// runner's own), and if the stream is unavailable (a proxy that
			// buffers, say), polling is all there is.
			var fin task.Status
			if fin, err = defaultPoller().final(ctx, c, st.TaskID); err == nil {
				st = fin
			}
		}
		if ctx.Err() != nil {
			fmt.Fprintf(env.stderr, "%s: stopped waiting; task %s goes on (wrench watch %s)\n", cmd, st.TaskID, st.TaskID)
			return exitUnresolved
		}
		if err != nil {
			return clientError(env, cmd, cf, err)
		}
	}
	res, err := api.ResultOf(st)
	if err != nil {
		return clientError(env, cmd, cf, err)
	}
	if cf.jsonOut && !follow {
		_ = printJSON(env.stdout, st)
	}
	if cf.jsonOut && out == env.stdout {
		out = env.stderr // stdout holds JSON only
	}
	fmt.Fprintln(out, outcomeLine(res))
	return res.Status.ExitCode()
}

// followLive redraws one progress line on w: on every event and every
// second for the elapsed time.
func followLive(ctx context.Context, c *api.Client, w io.Writer, st task.Status) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	events := make(chan task.Event)
	done := make(chan error, 1)
	go func() {
		done <- c.Events(ctx, st.TaskID, 0, func(ev task.Event) error {
			select {
			case events <- ev:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		})
	}()
	tr := newTracker(st)
	draw := func() { fmt.Fprintf(w, "\r%s\x1b[K", clip(tr.line(time.Now()), 150)) }
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	draw()
	for {
		select {
		case ev := <-events:
			tr.add(ev)
			draw()
		case <-tick.C:
			draw()
		case err := <-done:
			fmt.Fprintln(w)
			return err
		}
	}
}

// poller waits for a task's stored state to be final.
type poller struct {
	// first and max bound the interval between polls, which doubles.
	first, max time.Duration
	// request bounds one status request.
	request time.Duration
	// failures is how many transient failures in a row end the wait.
	failures int
}

// defaultPoller rides out a server restart of about a minute.
func defaultPoller() poller {
	return poller{first: 100 * time.Millisecond, max: 2 * time.Second, request: 30 * time.Second, failures: 30}
}

// final polls the status of task id until it is final and returns it (at
// once when it already is). Transient failures (see api.Transient) are
// retried up to p.failures in a row; other errors, and ctx's, end the wait.
func (p poller) final(ctx context.Context, c *api.Client, id string) (task.Status, error) {
	wait := p.first
	failed := 0
	for {
		rctx, cancel := context.WithTimeout(ctx, p.request)
		st, err := c.Status(rctx, id)
		cancel()
		switch {
		case err == nil && st.State.Final():
			return st, nil
		case err == nil:
			failed = 0
		case ctx.Err() != nil:
			return st, ctx.Err()
		case !api.Transient(err):
			return st, err
		default:
			if failed++; failed >= p.failures {
				return st, fmt.Errorf("status of %s: %d failures in a row, the last: %w", id, failed, err)
			}
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return st, ctx.Err()
		case <-t.C:
		}
		wait = min(2*wait, p.max)
	}
}
