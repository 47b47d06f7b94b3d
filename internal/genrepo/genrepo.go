// Package genrepo generates git repositories of a given size for
// benchmarks: deterministic text-like files, a history of small edits,
// packed as a repository kept on disk usually is.
package genrepo

import (
	"bufio"
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// Bench is the benchmark repository of the workspace and environment
// benchmarks: about 5,000 files, 500 commits and a 50 MB tree.
var Bench = Spec{Files: 5000, Commits: 500, Bytes: 50 << 20}

// Spec sizes a generated repository.
type Spec struct {
	Files   int // files in the tree
	Commits int // commits on main
	Bytes   int // approximate size of the checked-out tree
}

// Generate writes a repository at dir with `git fast-import`
// (deterministic text-like content): the first commit adds every file,
// each later one edits a few lines of ten files. It is then packed with
// `git gc`, as a repository kept on disk usually is.
func Generate(tb testing.TB, dir string, spec Spec) {
	tb.Helper()
	RequireGit(tb)
	Git(tb, "", "init", "-q", "-b", "main", dir)
	cmd := Cmd(dir, "fast-import", "--quiet")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		tb.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	w := bufio.NewWriterSize(stdin, 1<<20)
	rng := rand.New(rand.NewPCG(1, 2))
	words := make([]string, 4096)
	for i := range words {
		b := make([]byte, 3+rng.IntN(8))
		for j := range b {
			b[j] = byte('a' + rng.IntN(26))
		}
		words[i] = string(b)
	}
	line := func() string {
		var sb strings.Builder
		for k := 0; k < 8; k++ {
			sb.WriteString(words[rng.IntN(len(words))])
			sb.WriteByte(' ')
		}
		sb.WriteByte('\n')
		return sb.String()
	}
	avg := spec.Bytes / spec.Files
	paths := make([]string, spec.Files)
	contents := make([][]string, spec.Files)
	for i := range paths {
		paths[i] = fmt.Sprintf("pkg%02d/sub%02d/file%04d.txt", i%50, (i/50)%10, i)
		n := avg/2 + rng.IntN(avg+1)
		for size := 0; size < n; {
			l := line()
			contents[i] = append(contents[i], l)
			size += len(l)
		}
	}
	emit := func(i int) {
		data := strings.Join(contents[i], "")
		fmt.Fprintf(w, "M 100644 inline %s\ndata %d\n%s\n", paths[i], len(data), data)
	}
	for c := 0; c < spec.Commits; c++ {
		fmt.Fprintf(w, "commit refs/heads/main\ncommitter Bench <bench@example.com> %d +0000\n", 1700000000+c*60)
		msg := fmt.Sprintf("commit %d\n", c)
		fmt.Fprintf(w, "data %d\n%s", len(msg), msg)
		if c == 0 {
			for i := range paths {
				emit(i)
			}
			continue
		}
		for k := 0; k < 10; k++ {
			i := rng.IntN(len(paths))
			for e := 0; e < 3; e++ {
				contents[i][rng.IntN(len(contents[i]))] = line()
			}
			emit(i)
		}
	}
	if err := w.Flush(); err != nil {
		tb.Fatal(err)
	}
	stdin.Close()
	if err := cmd.Wait(); err != nil {
		tb.Fatalf("git fast-import: %v", err)
	}
	Git(tb, dir, "gc", "-q")
	Git(tb, dir, "reset", "-q", "--hard", "main")
}

// RequireGit skips tb when the git CLI is missing, except under CI=true,
// where it fails.
func RequireGit(tb testing.TB) {
	tb.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		if os.Getenv("CI") == "true" {
			tb.Fatal("git CLI not found (required under CI=true)")
		}
		tb.Skip("git CLI not found")
	}
}

// Cmd is a git command in dir with a neutral environment (no system or
// global configuration, a fixed author).
func Cmd(dir string, args ...string) *exec.Cmd {
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null",
		"GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com")
	return cmd
}

// Git runs the git CLI in dir and returns its trimmed stdout; it fails tb
// on an error.
func Git(tb testing.TB, dir string, args ...string) string {
	tb.Helper()
	cmd := Cmd(dir, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		tb.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return strings.TrimSpace(string(out))
}
