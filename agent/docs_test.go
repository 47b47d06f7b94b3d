package agent_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestChecklistNamesWhatExists: every file and test the checklist in
// docs/agent.md names exists, so the page cannot point at what is gone.
func TestChecklistNamesWhatExists(t *testing.T) {
	root := filepath.Join("..")
	doc, err := os.ReadFile(filepath.Join(root, "docs", "agent.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, checklist, ok := strings.Cut(string(doc), "\n## Checklist\n")
	if !ok {
		t.Fatal("docs/agent.md has no Checklist section")
	}
	tests := map[string]bool{}
	testFunc := regexp.MustCompile(`(?m)^func (Test\w+)\(`)
	err = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && strings.HasPrefix(d.Name(), ".") && p != root {
			return filepath.SkipDir
		}
		if strings.HasSuffix(p, "_test.go") {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			for _, m := range testFunc.FindAllStringSubmatch(string(b), -1) {
				tests[m[1]] = true
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	rows := 0
	for _, line := range strings.Split(checklist, "\n") {
		cells := strings.Split(strings.Trim(line, "| "), "|")
		if !strings.HasPrefix(line, "| ") || len(cells) != 3 || strings.HasPrefix(cells[0], "-") || strings.TrimSpace(cells[0]) == "asked for" {
			continue
		}
		rows++
		for _, m := range regexp.MustCompile("`([^`]+)`").FindAllStringSubmatch(cells[1], -1) {
			if _, err := os.Stat(filepath.Join(root, m[1])); err != nil {
				t.Errorf("checklist row %q: %s does not exist", strings.TrimSpace(cells[0]), m[1])
			}
		}
		for _, m := range regexp.MustCompile("`(Test\\w+)`").FindAllStringSubmatch(cells[2], -1) {
			if !tests[m[1]] {
				t.Errorf("checklist row %q: no test %s", strings.TrimSpace(cells[0]), m[1])
			}
		}
	}
	if rows < 30 {
		t.Errorf("the checklist has %d rows", rows)
	}
}
