package workspace

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/wrenchworks/wrench/task"
)

// mutation changes a working tree the way a shell command would.
type mutation struct {
	name string
	do   func(t *testing.T, dir string)
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func writeFile(t *testing.T, dir, rel, content string, mode fs.FileMode) {
	t.Helper()
	p := filepath.Join(dir, rel)
	must(t, os.MkdirAll(filepath.Dir(p), 0o755))
	must(t, os.WriteFile(p, []byte(content), mode))
	must(t, os.Chmod(p, mode))
}

// mutations are the working-tree changes checkpoints, rollbacks and diffs
// are tested with.
var mutations = []mutation{
	{"modify", func(t *testing.T, d string) { writeFile(t, d, "README.md", "hello\nthere\nworld\n", 0o644) }},
	{"append no newline", func(t *testing.T, d string) { writeFile(t, d, "README.md", "hello\nworld\nno newline", 0o644) }},
	{"add nested", func(t *testing.T, d string) { writeFile(t, d, "a/b/c/d.txt", "deep\n", 0o644) }},
	{"delete file", func(t *testing.T, d string) { must(t, os.Remove(filepath.Join(d, "src/main.go"))) }},
	{"delete dir", func(t *testing.T, d string) { must(t, os.RemoveAll(filepath.Join(d, "src"))) }},
	{"chmod +x", func(t *testing.T, d string) { must(t, os.Chmod(filepath.Join(d, "README.md"), 0o755)) }},
	{"chmod -x", func(t *testing.T, d string) { must(t, os.Chmod(filepath.Join(d, "scripts/run.sh"), 0o644)) }},
	{"chmod and edit", func(t *testing.T, d string) { writeFile(t, d, "scripts/run.sh", "#!/bin/sh\necho changed\n", 0o644) }},
	{"binary modify", func(t *testing.T, d string) {
		writeFile(t, d, "data/blob.bin", "\x00\x01\x02\x03changed\x00\xff", 0o644)
	}},
	{"binary add", func(t *testing.T, d string) {
		var b bytes.Buffer
		for i := range 5000 {
			b.WriteByte(byte(i * 7))
		}
		writeFile(t, d, "data/new.bin", b.String(), 0o644)
	}},
	{"binary delete", func(t *testing.T, d string) { must(t, os.Remove(filepath.Join(d, "data/blob.bin"))) }},
	{"empty dirs", func(t *testing.T, d string) { must(t, os.MkdirAll(filepath.Join(d, "empty/nested"), 0o755)) }},
	{"empty file", func(t *testing.T, d string) { writeFile(t, d, "empty.txt", "", 0o644) }},
	{"symlink add", func(t *testing.T, d string) { must(t, os.Symlink("../outside/target", filepath.Join(d, "src/l"))) }},
	{"symlink retarget", func(t *testing.T, d string) {
		must(t, os.Remove(filepath.Join(d, "link")))
		must(t, os.Symlink("src/main.go", filepath.Join(d, "link")))
	}},
	{"symlink to file", func(t *testing.T, d string) {
		must(t, os.Remove(filepath.Join(d, "link")))
		writeFile(t, d, "link", "now a file\n", 0o644)
	}},
	{"file to symlink", func(t *testing.T, d string) {
		must(t, os.Remove(filepath.Join(d, "README.md")))
		must(t, os.Symlink("/etc/hostname", filepath.Join(d, "README.md")))
	}},
	{"file to dir", func(t *testing.T, d string) {
		must(t, os.Remove(filepath.Join(d, "README.md")))
		writeFile(t, d, "README.md/inner.txt", "inner\n", 0o644)
	}},
	{"dir to file", func(t *testing.T, d string) {
		must(t, os.RemoveAll(filepath.Join(d, "src")))
		writeFile(t, d, "src", "flat\n", 0o644)
	}},
	{"rename", func(t *testing.T, d string) {
		must(t, os.Rename(filepath.Join(d, "src/lib/util.go"), filepath.Join(d, "src/lib/helpers.go")))
	}},
	{"rename and edit", func(t *testing.T, d string) {
		must(t, os.Remove(filepath.Join(d, "src/lib/util.go")))
		writeFile(t, d, "pkg/util.go", strings.Replace(utilGo, "return a - b", "return a + b", 1), 0o644)
	}},
	{"odd names", func(t *testing.T, d string) {
		writeFile(t, d, "with space.txt", "s\n", 0o644)
		writeFile(t, d, "ünïcode/ƒile.txt", "u\n", 0o644)
		writeFile(t, d, "quote\"and\\back.txt", "q\n", 0o644)
		writeFile(t, d, "tab\tname", "t\n", 0o644)
	}},
	{"large file", func(t *testing.T, d string) {
		var b strings.Builder
		for i := 0; b.Len() < streamThreshold+(1<<20); i++ {
			fmt.Fprintf(&b, "line %d of a large generated file\n", i)
		}
		writeFile(t, d, "large.txt", b.String(), 0o644)
	}},
	{"many edits", func(t *testing.T, d string) {
		var a, b strings.Builder
		for i := range 400 {
			fmt.Fprintf(&a, "line %d\n", i)
			if i%7 == 0 {
				fmt.Fprintf(&b, "changed %d\n", i)
			} else if i%11 != 0 {
				fmt.Fprintf(&b, "line %d\n", i)
			}
		}
		writeFile(t, d, "src/lib/util.go", b.String(), 0o644)
	}},
}

// fullListing describes everything under dir except .git, directories
// included, for exact comparisons.
func fullListing(t testing.TB, dir string) string {
	t.Helper()
	var lines []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if d.Name() == ".git" {
			return filepath.SkipDir
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		switch {
		case fi.IsDir():
			lines = append(lines, "d "+rel)
		case fi.Mode()&fs.ModeSymlink != 0:
			target, _ := os.Readlink(p)
			lines = append(lines, "l "+rel+" -> "+target)
		default:
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			lines = append(lines, fmt.Sprintf("f %s %o %s", rel, fi.Mode().Perm(), blobHash(data)))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

func TestCheckpointRollbackRoundTrip(t *testing.T) {
	fx := newFixture(t)
	m, _ := testManager(t, false, nil)
	for _, mu := range mutations {
		t.Run(mu.name, func(t *testing.T) {
			w, err := m.Open(ctxT(t), "t", task.Repo{URL: fx.dir}, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer w.Close()
			head := runGit(t, w.Dir(), "rev-parse", "HEAD")
			base := fullListing(t, w.Dir())
			mu.do(t, w.Dir())
			after := fullListing(t, w.Dir())
			if after == base {
				t.Fatal("mutation changed nothing")
			}
			cp, err := w.Checkpoint(ctxT(t), "after "+mu.name)
			if err != nil {
				t.Fatal(err)
			}
			if err := w.Rollback(ctxT(t), w.BaseCheckpoint()); err != nil {
				t.Fatal(err)
			}
			if got := fullListing(t, w.Dir()); got != base {
				t.Fatalf("after rollback to base:\n%s\nwant:\n%s", got, base)
			}
			if err := w.Rollback(ctxT(t), cp); err != nil {
				t.Fatal(err)
			}
			if got := fullListing(t, w.Dir()); got != after {
				t.Fatalf("after rollback to checkpoint:\n%s\nwant:\n%s", got, after)
			}
			// Checkpoints never move HEAD, a branch or the index, and the
			// private ref is not in the working tree's repository.
			if got := runGit(t, w.Dir(), "rev-parse", "HEAD"); got != head {
				t.Errorf("HEAD moved to %s", got)
			}
			if refs := runGit(t, w.Dir(), "for-each-ref"); strings.Contains(refs, "wrench") {
				t.Errorf("private ref leaked into the workspace:\n%s", refs)
			}
			if err := w.Rollback(ctxT(t), w.BaseCommit()); err != nil {
				t.Fatal(err)
			}
			if got := fullListing(t, w.Dir()); got != base {
				t.Fatalf("after rollback to base commit:\n%s\nwant:\n%s", got, base)
			}
			if st := runGit(t, w.Dir(), "status", "--porcelain"); st != "" {
				t.Errorf("git status after rollback to base:\n%s", st)
			}
		})
	}
}

func TestRollbackKeepsIgnoredFiles(t *testing.T) {
	fx := newFixture(t)
	m, _ := testManager(t, false, nil)
	w, err := m.Open(ctxT(t), "t", task.Repo{URL: fx.dir}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	writeFile(t, w.Dir(), "build/out.o", "object\n", 0o644)
	writeFile(t, w.Dir(), "src/debug.log", "log\n", 0o644)
	writeFile(t, w.Dir(), "src/new.go", "package main\n", 0o644)
	cp, err := w.Checkpoint(ctxT(t), "with ignored files")
	if err != nil {
		t.Fatal(err)
	}
	must(t, os.Remove(filepath.Join(w.Dir(), "src/new.go")))
	writeFile(t, w.Dir(), "build/later.o", "later\n", 0o644)
	if err := w.Rollback(ctxT(t), w.BaseCheckpoint()); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"build/out.o", "build/later.o", "src/debug.log"} {
		if _, err := os.Stat(filepath.Join(w.Dir(), p)); err != nil {
			t.Errorf("ignored %s: %v", p, err)
		}
	}
	if err := w.Rollback(ctxT(t), cp); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(w.Dir(), "src/new.go")); err != nil {
		t.Errorf("src/new.go not restored: %v", err)
	}
	d, err := w.Diff(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(d, "out.o") || strings.Contains(d, "debug.log") || !strings.Contains(d, "src/new.go") {
		t.Errorf("diff should hold src/new.go and no ignored file:\n%s", d)
	}
	changed, err := w.Changed(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(changed, ",") != "src/new.go" {
		t.Errorf("Changed = %v", changed)
	}
}

func TestRollbackErrors(t *testing.T) {
	fx := newFixture(t)
	m, _ := testManager(t, false, nil)
	w, err := m.Open(ctxT(t), "t", task.Repo{URL: fx.dir}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"", "nope", fx.first, strings.Repeat("0", 40)} {
		if err := w.Rollback(ctxT(t), id); !errors.Is(err, ErrUnknownCheckpoint) {
			t.Errorf("Rollback(%q) = %v, want ErrUnknownCheckpoint", id, err)
		}
	}
	must(t, w.Close())
	must(t, w.Close())
	if _, err := w.Checkpoint(ctxT(t), "x"); !errors.Is(err, ErrClosed) {
		t.Errorf("Checkpoint after Close = %v", err)
	}
	if _, err := os.Stat(w.Dir()); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Close left %s: %v", w.Dir(), err)
	}
}
