package agent

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/wrenchworks/wrench/sandbox"
)

// DiagnosticsConfig says which checker runs after a write tool changed
// files: a syntax check standing in for an editor's diagnostics. The checker's
// complaints are appended to the write's result, so the model fixes them
// in its next step.
type DiagnosticsConfig struct {
	// Disabled turns diagnostics off.
	Disabled bool
	// Commands maps a file extension (".go") to a shell command run in the
	// sandbox, at the workspace root, after a write tool changed files with
	// that extension; "{files}" in it becomes those files, shell-quoted.
	// The command reports problems by exiting non-zero; its output is what
	// the model sees. Nil means DefaultDiagnostics; an empty command turns
	// one extension off. A checker that is not installed (exit code 127) is
	// skipped for the rest of the run.
	Commands map[string]string
	// Timeout bounds one checker run (default 30s).
	Timeout time.Duration
}

// pyCheck parses Python files without writing .pyc files into the
// workspace (py_compile would).
const pyCheck = `python3 -c 'import ast, sys
for f in sys.argv[1:]:
    try:
        ast.parse(open(f, "rb").read(), f)
    except SyntaxError as e:
        print("%s:%s:%s: SyntaxError: %s" % (e.filename, e.lineno, e.offset, e.msg)); sys.exit(1)' {files}`

// DefaultDiagnostics returns the built-in checkers: syntax checks that are
// fast and change nothing. Go files go through gofmt -e (syntax errors
// only; formatting is not judged), Python files through the ast parser.
func DefaultDiagnostics() map[string]string {
	return map[string]string{
		".go": "gofmt -e -l {files} >/dev/null",
		".py": pyCheck,
	}
}

// diagnostics is a run's checker state.
type diagnostics struct {
	// missing holds extensions whose checker is not installed.
	missing map[string]bool
}

// enabled says whether any checker may run.
func (c DiagnosticsConfig) enabled() bool {
	if c.Disabled {
		return false
	}
	for _, cmd := range c.Commands {
		if strings.TrimSpace(cmd) != "" {
			return true
		}
	}
	return false
}

// addDiagnostics runs the checkers after a write that changed files and
// puts their complaints into the write's own result: what the model reads,
// and what people see (the tool_result event and the trajectory's display).
// The raw output replay compares stays as the tool returned it.
func (s *runState) addDiagnostics(ctx context.Context, res *toolResult) {
	if len(res.writes) == 0 || res.isError {
		return
	}
	n := s.diagnose(ctx, res.writes)
	if n == "" {
		return
	}
	res.display = joinNotes(cmp.Or(res.display, res.output), []string{n})
	res.output = joinNotes(res.output, []string{n})
}

// diagnose runs the checkers for the files a call's writes left in place
// and returns a note for the model, empty when nothing is wrong.
func (s *runState) diagnose(ctx context.Context, writes []fileWrite) string {
	cfg := s.a.cfg.Diagnostics
	if !cfg.enabled() {
		return ""
	}
	byExt := map[string][]string{}
	for _, w := range writes {
		p := w.path
		if w.after == nil {
			continue // deleted
		}
		ext := path.Ext(p)
		if strings.TrimSpace(cfg.Commands[ext]) == "" || s.diag.missing[ext] || slices.Contains(byExt[ext], p) {
			continue
		}
		byExt[ext] = append(byExt[ext], p)
	}
	var notes []string
	for _, ext := range slices.Sorted(maps.Keys(byExt)) {
		quoted := make([]string, len(byExt[ext]))
		for i, p := range byExt[ext] {
			quoted[i] = shellQuote(p)
		}
		cmd := strings.ReplaceAll(cfg.Commands[ext], "{files}", strings.Join(quoted, " "))
		res, err := s.r.Env.Exec(ctx, sandbox.ExecRequest{Command: cmd, Timeout: cfg.Timeout, MaxOutput: execOutputCap})
		switch {
		case err != nil || res.TimedOut:
			s.logEvent("diagnostics for %s did not run: %v", ext, cmpErr(err, fmt.Errorf("timed out after %s", cfg.Timeout)))
			continue
		case res.ExitCode == 127:
			if s.diag.missing == nil {
				s.diag.missing = map[string]bool{}
			}
			s.diag.missing[ext] = true
			s.logEvent("diagnostics for %s skipped: the checker is not installed in the sandbox", ext)
			continue
		case res.ExitCode == 0:
			continue
		}
		out := strings.TrimSpace(capOutput(string(res.Output), displayChars, res.Dropped))
		if out == "" {
			out = "(no output)"
		}
		notes = append(notes, fmt.Sprintf("Diagnostics for %s (exit code %d):\n%s", strings.Join(byExt[ext], ", "), res.ExitCode, out))
	}
	if len(notes) == 0 {
		return ""
	}
	return strings.Join(notes, "\n\n") + "\nFix these problems before going on."
}

// shellQuote quotes s for a POSIX shell.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_./-") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
