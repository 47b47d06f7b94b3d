package importrules

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// logCall matches a log call with a key k (the first group's key).
func logCall(key string) *regexp.Regexp {
	return regexp.MustCompile(`\b(log|logger|Log|Logger|slog)(\(\))?\.(Debug|Info|Warn|Error|Log)(Context)?\([^\n]*"` + key + `",`)
}

// TestLogLinesUseTaskID: a task's id is logged under one key, task_id
// (telemetry.LogKeyTaskID), never "task", and an error under one key,
// err, never "error", so one log query finds every line of a task or
// every error (docs/operations.md, "Logs").
func TestLogLinesUseTaskID(t *testing.T) {
	wrong := map[string]*regexp.Regexp{"task_id": logCall("task"), "err": logCall("error")}
	eachSourceLine(t, func(rel string, n int, line string) {
		for want, re := range wrong {
			if re.MatchString(line) {
				t.Errorf("%s:%d logs under the wrong key: use %q", rel, n, want)
			}
		}
	})
}

// TestTaskFinishedLoggedOnce: "task finished" is the one line of a task's
// final state, logged in one place (the dispatcher, when the state is
// final); a worker's attempt logs "attempt finished".
func TestTaskFinishedLoggedOnce(t *testing.T) {
	finished := regexp.MustCompile(`\.(Debug|Info|Warn|Error)(Context)?\("task finished"`)
	var at []string
	eachSourceLine(t, func(rel string, n int, line string) {
		if finished.MatchString(line) {
			at = append(at, rel)
		}
	})
	if len(at) != 1 || at[0] != filepath.Join("dispatcher", "ack.go") {
		t.Errorf(`"task finished" is logged in %v; want dispatcher/ack.go only`, at)
	}
}

// eachSourceLine calls fn for every line of the module's non-test Go
// files.
func eachSourceLine(t *testing.T, fn func(rel string, n int, line string)) {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	err = filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		for i, line := range strings.Split(string(b), "\n") {
			fn(rel, i+1, line)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// afterLife are the files whose task_id lines are logged with no context
// of the task to hand, each with why.
var afterLife = map[string]string{
	filepath.Join("sandbox", "reaper", "reaper.go"): "reaps what a task left after its life, from labels; no trace of it remains",
	filepath.Join("egress", "session.go"):           "the accept loop of a session's socket outlives any one call",
}

// TestTaskLinesCarryTheTaskContext: a line that names a task_id is logged
// with the task's context, so it says the task's trace_id too
// (docs/operations.md, "Logs"): through a logger bound to it (the
// dispatcher's flight logger, the worker's run logger, with task_id
// already in them) or a *Context call. Not with task_id on a plain
// Info/Warn/… call, which no handler can tie to a trace.
func TestTaskLinesCarryTheTaskContext(t *testing.T) {
	plain := regexp.MustCompile(`\.(Debug|Info|Warn|Error)\("[^"]*",[^\n]*"` + "task_id" + `"`)
	eachSourceLine(t, func(rel string, n int, line string) {
		if strings.HasPrefix(rel, "internal"+string(filepath.Separator)) || strings.HasPrefix(rel, "tools"+string(filepath.Separator)) {
			return // test kits and tools: no task's life
		}
		if plain.MatchString(line) && afterLife[rel] == "" {
			t.Errorf("%s:%d logs a task_id without the task's context: use its bound logger or a *Context call", rel, n)
		}
	})
}
