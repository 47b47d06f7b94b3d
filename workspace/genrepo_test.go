package workspace

import (
	"bufio"
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"testing"
)

// genRepoSpec sizes a generated repository.
type genRepoSpec struct {
	Files   int // files in the tree
	Commits int // commits on main
	Bytes   int // approximate size of the checked-out tree
}

// generateRepo writes a repository at dir with `git fast-import`
// (deterministic text-like content): the first commit adds every file,
// each later one edits a few lines of ten files. It is then packed with
// `git gc`, as a repository kept on disk usually is.
func generateRepo(tb testing.TB, dir string, spec genRepoSpec) {
	tb.Helper()
	requireGit(tb)
	runGit(tb, "", "init", "-q", "-b", "main", dir)
	cmd := gitCmd(dir, "fast-import", "--quiet")
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
	runGit(tb, dir, "gc", "-q")
	runGit(tb, dir, "reset", "-q", "--hard", "main")
}

// runGit runs the git CLI in dir and returns its trimmed stdout.
func runGit(tb testing.TB, dir string, args ...string) string {
	tb.Helper()
	cmd := gitCmd(dir, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		tb.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return strings.TrimSpace(string(out))
}
