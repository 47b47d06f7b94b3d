package agent

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
)

// The error classes a failed command is put in, so the model (and the
// recovery notes) can tell a missing dependency from a test failure.
const (
	ClassMissingDependency = "missing_dependency"
	ClassSyntax            = "syntax"
	ClassAssertion         = "assertion"
	ClassPermission        = "permission"
	ClassResources         = "resources" // a sandbox limit: processes, memory, disk, open files
	ClassTimeout           = "timeout"
	ClassUnknown           = "unknown"
)

var classPatterns = []struct {
	class string
	re    *regexp.Regexp
}{
	// First: running out of pids reads "fork: Resource temporarily
	// unavailable" and was taken for a permission problem.
	{ClassResources, regexp.MustCompile(`(?i)resource temporarily unavailable|cannot fork|fork failed|cannot allocate memory|out of memory|no space left on device|disk quota exceeded|too many open files|\bEAGAIN\b|\bENOMEM\b|\bENOSPC\b|\bEMFILE\b`)},
	{ClassPermission, regexp.MustCompile(`(?i)permission denied|PermissionError|EACCES|operation not permitted|read-only file system`)},
	{ClassMissingDependency, regexp.MustCompile(`ModuleNotFoundError|No module named|ImportError|command not found|executable file not found|cannot find package|no required module provides|Cannot find module|package \S+ is not in (GOROOT|std)|could not import|Could not find a version|No such file or directory.*\b(?:python|node|go|gcc|make)\b|unable to locate package`)},
	{ClassSyntax, regexp.MustCompile(`SyntaxError|IndentationError|TabError|(?i:syntax error)|unexpected token|Unexpected token|expected declaration|expected '[^']+', found|non-declaration statement|ParseError|(?i:parse error)|undefined: |cannot use .* as .* value|declared and not used|missing return`)},
	{ClassAssertion, regexp.MustCompile(`AssertionError|assert(ion)? failed|--- FAIL|\bFAILED\b|\bFAIL\b|Expected|expected .* got|panic:|Traceback \(most recent call last\)|\bnot ok\b|✕`)},
}

// ClassifyError puts a failed command's output in one of the error classes:
// missing_dependency, syntax, assertion, permission, resources, timeout or
// unknown.
func ClassifyError(output string, exitCode int, timedOut bool) string {
	if timedOut || exitCode == 124 {
		return ClassTimeout
	}
	for _, p := range classPatterns {
		if p.re.MatchString(output) {
			return p.class
		}
	}
	if exitCode == 127 {
		return ClassMissingDependency
	}
	if exitCode == 126 {
		return ClassPermission
	}
	if exitCode == 137 {
		return ClassResources // SIGKILL: the sandbox's memory limit
	}
	return ClassUnknown
}

var (
	reHex      = regexp.MustCompile(`0x[0-9a-fA-F]+`)
	reLine     = regexp.MustCompile(`(?i)\bline \d+`)
	reColNum   = regexp.MustCompile(`:\d+(:\d+)?\b`)
	reTmp      = regexp.MustCompile(`(/tmp|/var/folders|/private/var)/[^\s:'"]*`)
	reDuration = regexp.MustCompile(`\b\d+(\.\d+)?(ns|µs|us|ms|s|m)\b`)
	reGoroute  = regexp.MustCompile(`goroutine \d+`)
	reLongNum  = regexp.MustCompile(`\b\d{4,}\b`)
	reErrLine  = regexp.MustCompile(`(?i)error|fail|panic|exception|not found|denied|traceback|undefined|expected`)
)

// normalizeSignature reduces output to what identifies the error: the lines
// that look like errors (or the last lines), with line numbers, addresses,
// temp paths, durations and long numbers replaced.
func normalizeSignature(output string) string {
	lines := strings.Split(strings.TrimSpace(output), "\n")
	var picked []string
	for _, l := range lines {
		if reErrLine.MatchString(l) {
			picked = append(picked, l)
			if len(picked) == 8 {
				break
			}
		}
	}
	if len(picked) == 0 {
		picked = lines[max(0, len(lines)-5):]
	}
	s := strings.Join(picked, "\n")
	s = reHex.ReplaceAllString(s, "0xADDR")
	s = reLine.ReplaceAllString(s, "line N")
	s = reColNum.ReplaceAllString(s, ":N")
	s = reTmp.ReplaceAllString(s, "$1/TMP")
	s = reDuration.ReplaceAllString(s, "T")
	s = reGoroute.ReplaceAllString(s, "goroutine N")
	s = reLongNum.ReplaceAllString(s, "N")
	return strings.TrimSpace(s)
}

// ErrorSignature identifies a failure across attempts: the same error at
// another line, address or temp path has the same signature.
func ErrorSignature(class, output string) string {
	sum := sha256.Sum256([]byte(class + "\n" + normalizeSignature(output)))
	return hex.EncodeToString(sum[:8])
}

// recovery tracks failures within a run: per-class streaks, an attempt
// budget, and notes that escalate when the same failure repeats.
type recovery struct {
	budget int
	// seen counts each error signature.
	seen map[string]int
	// streak counts failed attempts since the last success; it earns a
	// "different approach" nudge at budget.
	streak int
	// failed remembers commands that failed, so their success ends the
	// subtask.
	failed map[string]bool
}

func newRecovery(budget int) recovery {
	return recovery{budget: budget, seen: map[string]int{}, failed: map[string]bool{}}
}

// failure records one failure and returns the notes to append to what the
// model sees. Only failures after the model changed something (attempting)
// count against the attempt budget: a reproduction run before any edit is
// not a failed attempt.
func (r *recovery) failure(class, output, cmd string, attempting bool) string {
	sig := ErrorSignature(class, output)
	r.seen[sig]++
	n := r.seen[sig]
	if attempting {
		r.streak++
		if n > 1 {
			r.streak++ // the same failure again weighs more than a new one
		}
	}
	if cmd != "" {
		r.failed[cmd] = true
	}
	var notes []string
	switch {
	case n == 2:
		notes = append(notes, "Note: this is the same error as an earlier attempt. Find its cause before trying again.")
	case n > 2:
		notes = append(notes, fmt.Sprintf("This same error has now occurred %d times: your current approach is not working. Try a completely different approach: re-read the relevant code, question your assumptions about the cause, and simplify.", n))
	}
	if r.streak >= r.budget {
		r.streak = 0
		notes = append(notes, "You have tried this several times without success. Consider a completely different strategy: (1) take another approach to the solution, (2) read more code to understand the root cause, (3) simplify your change.")
	}
	return strings.Join(notes, "\n")
}

// success records a successful command or verification; a command that
// failed before and now succeeds ends the subtask.
func (r *recovery) success(cmd string, verified bool) {
	if verified || (cmd != "" && r.failed[cmd]) {
		r.streak = 0
		clear(r.failed)
	}
}

// loopDetector finds the same (tool, arguments, result) repeated within a
// window of recent calls, outside the model (crush-style).
type loopDetector struct {
	window, repeats int
	recent          []string
	// nudged maps a key to the position in recent after which its repeats
	// count again once it was nudged.
	nudged map[string]int
	calls  int
}

func newLoopDetector(window, repeats int) loopDetector {
	return loopDetector{window: window, repeats: repeats, nudged: map[string]int{}}
}

// loopKey identifies a call and its result; the arguments are compared as
// JSON values, so key order and spacing do not matter, and durations,
// addresses and temp paths in the result are masked.
func loopKey(name, arguments, result string) string {
	var v any
	argText := arguments
	if json.Unmarshal([]byte(arguments), &v) == nil {
		if b, err := json.Marshal(v); err == nil {
			argText = string(b)
		}
	}
	h := sha256.New()
	if name == ToolBash {
		result = maskVolatile(result) // only command output carries timings
	}
	fmt.Fprintf(h, "%s\x00%s\x00%s", name, argText, result)
	return string(h.Sum(nil)[:12])
}

// observe records a call and says whether to nudge or to stop.
func (d *loopDetector) observe(key string) (nudge, stop bool) {
	d.calls++
	d.recent = append(d.recent, key)
	if len(d.recent) > d.window {
		d.recent = d.recent[1:]
	}
	from, wasNudged := d.nudged[key]
	count := 0
	for i, k := range d.recent {
		// Only calls after the nudge count again.
		if k == key && (!wasNudged || d.calls-len(d.recent)+i+1 >= from) {
			count++
		}
	}
	if count < d.repeats {
		return false, false
	}
	if wasNudged {
		return false, true
	}
	d.nudged[key] = d.calls
	return true, false
}

const loopNudge = "You have made this exact call %d times and got the same result each time. Repeating it will not change anything: do something different."
