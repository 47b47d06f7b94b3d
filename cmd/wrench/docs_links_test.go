package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// userDocs are the pages a new user reads; their flags, files and links
// must exist.
var userDocs = []string{"README.md", "docs/agent.md", "docs/decisions.md", "docs/scripted-model.md", "docs/reference.md", "examples/README.md"}

// TestUserDocsNameWhatExists: every flag the user docs name is a flag of
// the command they are about (or of some command), and every repository
// path and relative link they give exists.
func TestUserDocsNameWhatExists(t *testing.T) {
	root := moduleRoot(t)
	link := regexp.MustCompile(`\]\(([^)#\s]+)(#[^)]*)?\)`)
	repoPath := regexp.MustCompile("`((?:docs|examples|scripts|deploy|charts|cmd|agent|api|llm|task|worker|workspace|sandbox|queue|dispatcher|telemetry|github|bench|environment|policy|diff|internal)/[A-Za-z0-9_./-]+)`")
	for _, doc := range userDocs {
		path := filepath.Join(root, doc)
		b, err := os.ReadFile(path)
		if err != nil {
			t.Errorf("%s: %v", doc, err)
			continue
		}
		checkFlagReference(t, path, false)
		for _, m := range link.FindAllStringSubmatch(string(b), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			if _, err := os.Stat(filepath.Join(filepath.Dir(path), target)); err != nil {
				t.Errorf("%s links to %s, which does not exist", doc, target)
			}
		}
		for _, m := range repoPath.FindAllStringSubmatch(string(b), -1) {
			p := strings.TrimSuffix(m[1], "/")
			if strings.ContainsAny(p, "*…") {
				continue
			}
			if _, err := os.Stat(filepath.Join(root, p)); err != nil {
				t.Errorf("%s names %s, which does not exist", doc, m[1])
			}
		}
	}
}
