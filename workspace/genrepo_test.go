package workspace

import (
	"bufio"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// genRepoSpec sizes a generated repository.
type genRepoSpec struct {
	Files   int // files in the tree
	Commits int // commits on main
	Bytes   int // approximate size of the checked-out tree
}

// generateRepo writes a non-bare repository at dir with `git fast-import`
// (deterministic content) and packs it with `git gc`, like a repository a
// user keeps on disk. It needs the git CLI.
func generateRepo(tb testing.TB, dir string, spec genRepoSpec) {
	tb.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		tb.Skip("git CLI not found; it generates the benchmark repository")
	}
	runGit(tb, "", "init", "-q", "-b", "main", dir)
	cmd := exec.Command("git", "fast-import", "--quiet")
	cmd.Dir = dir
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
	avg := spec.Bytes / spec.Files
	content := func() []byte {
		n := avg/2 + rng.IntN(avg+1)
		var sb strings.Builder
		for sb.Len() < n {
			for k := 0; k < 8; k++ {
				sb.WriteString(words[rng.IntN(len(words))])
				sb.WriteByte(' ')
			}
			sb.WriteByte('\n')
		}
		return []byte(sb.String())
	}
	paths := make([]string, spec.Files)
	for i := range paths {
		paths[i] = fmt.Sprintf("pkg%02d/sub%02d/file%04d.txt", i%50, (i/50)%10, i)
	}
	when := int64(1700000000)
	for c := 0; c < spec.Commits; c++ {
		fmt.Fprintf(w, "commit refs/heads/main\ncommitter Bench <bench@example.com> %d +0000\n", when+int64(c)*60)
		msg := fmt.Sprintf("commit %d\n", c)
		fmt.Fprintf(w, "data %d\n%s", len(msg), msg)
		if c == 0 {
			for _, p := range paths {
				data := content()
				fmt.Fprintf(w, "M 100644 inline %s\ndata %d\n", p, len(data))
				w.Write(data)
				w.WriteByte('\n')
			}
			continue
		}
		for k := 0; k < 10; k++ {
			p := paths[rng.IntN(len(paths))]
			data := content()
			fmt.Fprintf(w, "M 100644 inline %s\ndata %d\n", p, len(data))
			w.Write(data)
			w.WriteByte('\n')
		}
	}
	if err := w.Flush(); err != nil {
		tb.Fatal(err)
	}
	stdin.Close()
	if err := cmd.Wait(); err != nil {
		tb.Fatalf("git fast-import: %v", err)
	}
	runGit(tb, dir, "gc", "-q")
	runGit(tb, dir, "reset", "-q", "--hard", "main")
}

// runGit runs the git CLI in dir and returns its trimmed stdout.
func runGit(tb testing.TB, dir string, args ...string) string {
	tb.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null",
		"GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com")
	out, err := cmd.Output()
	if err != nil {
		var stderr string
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = string(ee.Stderr)
		}
		tb.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, stderr)
	}
	return strings.TrimSpace(string(out))
}

var _ = filepath.Join
