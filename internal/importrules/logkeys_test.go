package importrules

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestLogLinesUseTaskID: a task's id is logged under one key, task_id
// (telemetry.LogKeyTaskID), never "task", so one log query finds every
// line of a task (docs/operations.md, "Logs").
func TestLogLinesUseTaskID(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	logCall := regexp.MustCompile(`\b(log|logger|Log|slog)\.(Debug|Info|Warn|Error|Log)(Context)?\([^\n]*"task",`)
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
		for i, line := range strings.Split(string(b), "\n") {
			if logCall.MatchString(line) {
				rel, _ := filepath.Rel(root, path)
				t.Errorf("%s:%d logs the task id under \"task\": use \"task_id\"", rel, i+1)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
