package workspace

import (
	"testing"

	"github.com/wrenchworks/wrench/internal/genrepo"
)

// runGit runs the git CLI in dir and returns its trimmed stdout.
func runGit(tb testing.TB, dir string, args ...string) string {
	tb.Helper()
	return genrepo.Git(tb, dir, args...)
}
