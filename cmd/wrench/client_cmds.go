package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/wrenchworks/wrench/api"
	"github.com/wrenchworks/wrench/task"
)

// clientFlags are the flags every command talking to a server shares.
type clientFlags struct {
	server  string
	token   string
	jsonOut bool
}

func (c *clientFlags) register(fs *flag.FlagSet, env *cliEnv) {
	def := env.getenv("WRENCH_SERVER")
	if def == "" {
		def = "http://" + defaultHTTPAddr
	}
	fs.StringVar(&c.server, "server", def, "server `URL` (default $WRENCH_SERVER, else "+"http://"+defaultHTTPAddr+", the local wrench serve)")
	fs.StringVar(&c.token, "token", env.getenv("WRENCH_API_TOKEN"), "bearer token (default $WRENCH_API_TOKEN)")
	fs.BoolVar(&c.jsonOut, "json", false, "print JSON on stdout")
}

func (c clientFlags) client() *api.Client { return api.NewClient(c.server, c.token) }

// oneID parses a command's flags and its single task id argument; when ok
// is false the command exits with code.
func oneID(fs *flag.FlagSet, env *cliEnv, args []string) (id string, code int, ok bool) {
	pos, code, ok := parseCommand(env, fs, args)
	if !ok {
		return "", code, false
	}
	if len(pos) != 1 {
		fmt.Fprintf(env.stderr, "%s: want exactly one task id, got %d arguments\nusage: %s\n", fs.Name(), len(pos), synopsis(fs.Name()))
		return "", exitBadInput, false
	}
	return pos[0], exitOK, true
}

// clientError reports err and returns the exit code: 2 for what the user
// can fix (unknown id, invalid task, missing token), 3 for the server or
// the network.
func clientError(env *cliEnv, cmd string, c clientFlags, err error) int {
	var e *api.Error
	var netErr *url.Error
	switch {
	case errors.Is(err, api.ErrUnauthorized):
		fmt.Fprintf(env.stderr, "%s: %s wants a valid bearer token: set --token or WRENCH_API_TOKEN\n", cmd, c.server)
		return exitBadInput
	case errors.As(err, &e) && e.StatusCode < 500:
		fmt.Fprintf(env.stderr, "%s: %s\n", cmd, e.Message)
		for _, f := range e.Fields {
			fmt.Fprintf(env.stderr, "  %s: %s\n", f.Field, f.Problem)
		}
		return exitBadInput
	case errors.Is(err, context.Canceled):
		fmt.Fprintf(env.stderr, "%s: interrupted\n", cmd)
		return exitInfra
	case errors.As(err, &netErr):
		fmt.Fprintf(env.stderr, "%s: cannot reach the server at %s (is `wrench serve` running?): %v\n", cmd, c.server, err)
		return exitInfra
	}
	fmt.Fprintf(env.stderr, "%s: %v\n", cmd, err)
	return exitInfra
}

func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// idCommand is the preamble the commands on one task share: flags, one
// task id, a client. It returns the parsed flags and id, or the exit code
// when they were not usable.
func idCommand(env *cliEnv, name string, args []string, more func(*flag.FlagSet)) (clientFlags, string, int, bool) {
	var f clientFlags
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(env.stderr)
	f.register(fs, env)
	if more != nil {
		more(fs)
	}
	id, code, ok := oneID(fs, env, args)
	return f, id, code, ok
}

// statusCommand runs a command that asks the server one thing about one
// task and gets its status back (status, cancel, resume): call makes the
// request; text is the human answer (--json prints the status instead).
func statusCommand(ctx context.Context, env *cliEnv, name string, args []string,
	call func(*api.Client, context.Context, string) (task.Status, error), text func(id string, st task.Status) string) int {
	f, id, code, ok := idCommand(env, name, args, nil)
	if !ok {
		return code
	}
	st, err := call(f.client(), ctx, id)
	if err != nil {
		return clientError(env, name, f, err)
	}
	if f.jsonOut {
		_ = printJSON(env.stdout, st)
		return exitOK
	}
	fmt.Fprintln(env.stdout, text(id, st))
	return exitOK
}

func cmdStatus(ctx context.Context, env *cliEnv, args []string) int {
	return statusCommand(ctx, env, "wrench status", args, (*api.Client).Status,
		func(_ string, st task.Status) string { return statusText(st, time.Now()) })
}

// statusText is the human form of a status: a headline and detail lines.
func statusText(st task.Status, now time.Time) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s  %s", st.TaskID, st.State)
	if st.Reason != "" {
		fmt.Fprintf(&b, " (%s)", st.Reason)
	}
	fmt.Fprintf(&b, "\n  created %s ago", age(now.Sub(st.CreatedAt)))
	if st.Attempt > 0 {
		fmt.Fprintf(&b, ", attempt %d", st.Attempt)
	}
	if st.Worker != "" {
		fmt.Fprintf(&b, " on %s", st.Worker)
	}
	if t := st.Task; t != nil {
		fmt.Fprintf(&b, "\n  repo %s", t.Repo.URL)
		if t.Repo.Ref != "" {
			fmt.Fprintf(&b, " @ %s", t.Repo.Ref)
		}
		fmt.Fprintf(&b, "\n  task %s", clip(t.Instruction, 100))
		if t.Tenant != "" && t.Tenant != task.DefaultTenant {
			fmt.Fprintf(&b, "\n  tenant %s", t.Tenant)
		}
	}
	if p := st.Progress; p != nil && !st.State.Final() {
		fmt.Fprintf(&b, "\n  turn %d, last tool %s, %s tokens, $%.4f", p.Turn, orDash(p.LastTool), tokens(p.Tokens), p.CostUSD)
	}
	if p := st.Pause; p != nil && st.State == task.StatePaused {
		fmt.Fprintf(&b, "\n  paused: %s", p)
		fmt.Fprintf(&b, "\n  continues once that budget has $%.4f left (a raised cap, or the next UTC day), or on `wrench resume %s`", p.NeedUSD, st.TaskID)
	}
	if u := st.Spent; u != nil && !st.State.Final() {
		fmt.Fprintf(&b, "\n  spent so far: %s tokens, $%.4f over %d model calls", tokens(u.InputTokens+u.OutputTokens), u.CostUSD, u.ModelCalls)
	}
	if r := st.Result; r != nil {
		fmt.Fprintf(&b, "\n  %s", strings.TrimPrefix(outcomeLine(*r), "wrench: "))
		if r.Resumed != "" {
			fmt.Fprintf(&b, "\n  %s", r.Resumed)
		}
		if r.HandedBack > 0 {
			fmt.Fprintf(&b, "\n  %d attempt(s) handed back by workers whose own infrastructure was unusable (not counted)", r.HandedBack)
		}
		if r.PullRequestURL != "" {
			fmt.Fprintf(&b, "\n  pull request %s", r.PullRequestURL)
		}
	}
	return b.String()
}

func cmdWatch(ctx context.Context, env *cliEnv, args []string) int {
	f, id, code, ok := idCommand(env, "wrench watch", args, nil)
	if !ok {
		return code
	}
	st, err := f.client().Status(ctx, id)
	if err != nil {
		return clientError(env, "wrench watch", f, err)
	}
	return waitFinal(ctx, env, env.stdout, "wrench watch", f, st, true)
}

func cmdResult(ctx context.Context, env *cliEnv, args []string) int {
	var patchFile, trajFile, logFile string
	f, id, code, ok := idCommand(env, "wrench result", args, func(fs *flag.FlagSet) {
		fs.StringVar(&patchFile, "patch", "", "write the patch to `FILE` (default: print it on stdout unless --json)")
		fs.StringVar(&trajFile, "trajectory", "", "write the task's JSONL trajectory to `FILE` (for wrench replay)")
		fs.StringVar(&logFile, "log", "", "write the task's run log to `FILE`")
	})
	if !ok {
		return code
	}
	c := f.client()
	res, st, err := c.Result(ctx, id)
	if errors.Is(err, api.ErrNotFinal) {
		fmt.Fprintf(env.stderr, "wrench result: task %s is %s; no result yet (use `wrench watch %s`)\n", id, st.State, id)
		return exitUnresolved
	}
	if err != nil {
		return clientError(env, "wrench result", f, err)
	}
	if res.Patch == "" {
		// Large patches live in the artifact store, not the state record.
		if res.Patch, err = c.Patch(ctx, id); err != nil {
			return clientError(env, "wrench result", f, err)
		}
	}
	if patchFile != "" {
		if err := os.WriteFile(patchFile, []byte(res.Patch), 0o644); err != nil {
			fmt.Fprintf(env.stderr, "wrench result: write patch: %v\n", err)
			return exitInfra
		}
	}
	for name, file := range map[string]string{api.TrajectoryArtifact: trajFile, api.LogArtifact: logFile} {
		if file == "" {
			continue
		}
		if code := downloadArtifact(ctx, env, f, id, name, file); code != exitOK {
			return code
		}
	}
	switch {
	case f.jsonOut:
		_ = printJSON(env.stdout, res)
	case patchFile == "":
		_, _ = io.WriteString(env.stdout, res.Patch)
	}
	fmt.Fprintln(env.stderr, outcomeLine(res))
	return res.Status.ExitCode()
}

func cmdCancel(ctx context.Context, env *cliEnv, args []string) int {
	return statusCommand(ctx, env, "wrench cancel", args, (*api.Client).Cancel, func(id string, st task.Status) string {
		switch {
		case st.State == task.StateCancelled:
			return id + " cancelled"
		case st.State.Final():
			return fmt.Sprintf("%s was already %s", id, st.State)
		}
		return fmt.Sprintf("%s is %s; cancellation requested, its worker is stopping it", id, st.State)
	})
}

func cmdResume(ctx context.Context, env *cliEnv, args []string) int {
	return statusCommand(ctx, env, "wrench resume", args, (*api.Client).Resume, func(id string, st task.Status) string {
		return fmt.Sprintf("%s is %s again; its next attempt continues from where it paused", id, st.State)
	})
}

func cmdList(ctx context.Context, env *cliEnv, args []string) int {
	var f clientFlags
	var o task.ListOptions
	var state string
	fs := flag.NewFlagSet("wrench list", flag.ContinueOnError)
	fs.SetOutput(env.stderr)
	f.register(fs, env)
	fs.StringVar(&state, "state", "", "only tasks in this state (queued, running, verifying, paused, resolved, unresolved, failed, cancelled, timed_out, rejected)")
	fs.IntVar(&o.Limit, "limit", 20, "tasks per page")
	fs.StringVar(&o.Cursor, "cursor", "", "continue after the page that printed this cursor")
	pos, code, ok := parseCommand(env, fs, args)
	if !ok {
		return code
	}
	if len(pos) > 0 {
		fmt.Fprintf(env.stderr, "wrench list: unexpected argument %q\n", pos[0])
		return exitBadInput
	}
	o.State = task.State(state)
	lr, err := f.client().List(ctx, o)
	if err != nil {
		return clientError(env, "wrench list", f, err)
	}
	if f.jsonOut {
		_ = printJSON(env.stdout, lr)
		return exitOK
	}
	tw := tabwriter.NewWriter(env.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSTATE\tAGE\tREPO\tTASK")
	now := time.Now()
	for _, st := range lr.Tasks {
		repo, instr := "", ""
		if st.Task != nil {
			repo, instr = clip(st.Task.Repo.URL, 40), clip(st.Task.Instruction, 50)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", st.TaskID, st.State, age(now.Sub(st.CreatedAt)), repo, instr)
	}
	_ = tw.Flush()
	if lr.NextCursor != "" {
		fmt.Fprintf(env.stderr, "more: wrench list --cursor %s\n", lr.NextCursor)
	}
	return exitOK
}

// age renders a duration coarsely: 42s, 5m, 3h, 2d.
func age(d time.Duration) string {
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", int(d.Hours()))
	}
	return fmt.Sprintf("%dd", int(d.Hours()/24))
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// downloadArtifact writes artifact name of task id to file.
func downloadArtifact(ctx context.Context, env *cliEnv, f clientFlags, id, name, file string) int {
	b, err := f.client().Artifact(ctx, id, name)
	if err != nil {
		return clientError(env, "wrench result", f, err)
	}
	if err := os.WriteFile(file, b, 0o644); err != nil {
		fmt.Fprintf(env.stderr, "wrench result: write %s: %v\n", name, err)
		return exitInfra
	}
	return exitOK
}
