package oracle

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wrenchworks/wrench/agent/editformat"
	"github.com/wrenchworks/wrench/llm/scripted"
)

// repeated has the same block twice, so a hunk's context matches first
// where the change is not.
const repeated = "a\nb\nc\nd\ne\nf\ng\n" + "a\nb\nc\nd\ne\nf\ng\n"

// numbered are 30 distinct lines.
func numbered() string {
	var b strings.Builder
	for i := range 30 {
		b.WriteString("x = " + strings.Repeat("1", i+1) + "\n")
	}
	return b.String()
}

// gitRepo makes a repository with base committed and target in the
// working tree, and returns its dir and `git diff` of the two.
func gitRepo(t *testing.T, base, target map[string]string) (string, string) {
	t.Helper()
	dir := t.TempDir()
	run := func(args ...string) string {
		cmd := exec.Command("git", append([]string{"-C", dir, "-c", "user.name=t", "-c", "user.email=t@e"}, args...)...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	write := func(files map[string]string) {
		for name, body := range files {
			p := filepath.Join(dir, name)
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			mode := os.FileMode(0o644)
			if strings.HasSuffix(name, ".sh") {
				mode = 0o755
			}
			if err := os.WriteFile(p, []byte(body), mode); err != nil {
				t.Fatal(err)
			}
		}
	}
	run("init", "-q")
	write(base)
	run("add", "-A")
	run("commit", "-qm", "base")
	for name := range base {
		if _, ok := target[name]; !ok {
			os.Remove(filepath.Join(dir, name))
		}
	}
	write(target)
	run("add", "-A")
	diff := run("diff", "--cached", "-M", "HEAD")
	run("reset", "-q", "--hard", "HEAD")
	run("clean", "-qfd")
	return dir, diff
}

// play runs a script's tool calls the way the agent's tools would: patch
// through the patch tool's own parser and applier, bash in bash; a view
// records what was read, and the patch tool refuses unread files.
func play(t *testing.T, dir string, yml []byte) (tools []string) {
	t.Helper()
	s, err := scripted.Parse(yml)
	if err != nil {
		t.Fatalf("script does not parse: %v\n%s", err, yml)
	}
	viewed := map[string]bool{}
	read := func(name string) ([]byte, error) { return os.ReadFile(filepath.Join(dir, name)) }
	for _, st := range s.Steps {
		for _, c := range st.ToolCalls {
			tools = append(tools, c.Name)
			var args map[string]string
			if err := json.Unmarshal([]byte(c.Arguments), &args); err != nil {
				t.Fatal(err)
			}
			switch c.Name {
			case "view":
				viewed[args["path"]] = true
			case "patch":
				changes, err := editformat.ApplyPatch(args["patch_text"], read, editformat.PatchOptions{})
				if err != nil {
					t.Fatalf("patch tool refuses: %v\n%s", err, args["patch_text"])
				}
				for _, ch := range changes {
					src := ch.Path
					if ch.From != "" {
						src = ch.From
					}
					if ch.Before != nil && !viewed[src] {
						t.Errorf("%s patched without a view", src)
					}
					p := filepath.Join(dir, ch.Path)
					if ch.After == nil {
						os.Remove(p)
						continue
					}
					os.MkdirAll(filepath.Dir(p), 0o755)
					if err := os.WriteFile(p, ch.After, 0o644); err != nil {
						t.Fatal(err)
					}
					if ch.From != "" {
						os.Remove(filepath.Join(dir, ch.From))
					}
				}
			case "bash":
				cmd := exec.Command("bash", "-c", args["command"])
				cmd.Dir = dir
				if out, err := cmd.CombinedOutput(); err != nil {
					t.Fatalf("bash %q: %v\n%s", args["command"], err, out)
				}
			}
		}
	}
	return tools
}

func baseOf(dir string) BaseReader {
	return func(name string) ([]byte, error) {
		out, err := exec.Command("git", "-C", dir, "show", "HEAD:"+name).Output()
		if err != nil {
			return nil, errors.Join(fs.ErrNotExist, err)
		}
		return out, nil
	}
}

func TestGoldReproducesTheTarget(t *testing.T) {
	cases := []struct {
		name         string
		base, target map[string]string
		via          string // "patch", "bash" or "both"
	}{
		{"update, add, delete", map[string]string{"a.go": "package a\n\nfunc A() int { return 1 }\n", "old.go": "package a\n"},
			map[string]string{"a.go": "package a\n\n// A is one.\nfunc A() int { return 1 }\n", "new/b.go": "package b\n"}, "patch"},
		{"two hunks in one file", map[string]string{"m.py": numbered()},
			map[string]string{"m.py": "y = 0\n" + strings.SplitN(numbered(), "\n", 2)[1] + "z = 2\n"}, "patch"},
		{"no newline at the end", map[string]string{"a.txt": "one\ntwo"}, map[string]string{"a.txt": "one\nthree"}, "bash"},
		{"context that matches earlier", map[string]string{"r.go": repeated},
			map[string]string{"r.go": repeated[:14] + strings.Replace(repeated[14:], "d\n", "D\n", 1)}, "bash"},
		{"rename with a change", map[string]string{"src/lib.py": "def f():\n    return 1\n\n\n" + strings.Repeat("# pad\n", 20)},
			map[string]string{"src/lib2.py": "def f():\n    return 2\n\n\n" + strings.Repeat("# pad\n", 20)}, "patch"},
		{"mixed", map[string]string{"a.txt": "one\ntwo", "b.txt": "b\n"}, map[string]string{"a.txt": "one\n2", "b.txt": "B\n"}, "both"},
		{"new executable", map[string]string{"a.txt": "a\n"}, map[string]string{"a.txt": "a\n", "run.sh": "#!/bin/sh\n"}, "bash"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir, gold := gitRepo(t, c.base, c.target)
			yml, err := Script(Gold, gold, baseOf(dir))
			if err != nil {
				t.Fatal(err)
			}
			tools := strings.Join(play(t, dir, yml), ",")
			for name, want := range c.target {
				got, err := os.ReadFile(filepath.Join(dir, name))
				if err != nil || string(got) != want {
					t.Errorf("%s = %q (%v), want %q", name, got, err, want)
				}
				if fi, err := os.Stat(filepath.Join(dir, name)); err == nil && strings.HasSuffix(name, ".sh") && fi.Mode()&0o111 == 0 {
					t.Errorf("%s is not executable", name)
				}
			}
			for name := range c.base {
				if _, ok := c.target[name]; !ok {
					if _, err := os.Stat(filepath.Join(dir, name)); err == nil {
						t.Errorf("%s still there", name)
					}
				}
			}
			hasPatch, hasBash := strings.Contains(tools, "patch"), strings.Contains(tools, "bash")
			if want := map[string][2]bool{"patch": {true, false}, "bash": {false, true}, "both": {true, true}}[c.via]; hasPatch != want[0] || hasBash != want[1] {
				t.Errorf("tools %s, want via %s", tools, c.via)
			}
			if !strings.HasSuffix(tools, "finish") {
				t.Errorf("script does not finish: %s", tools)
			}
		})
	}
}

func TestEmptyAndWrong(t *testing.T) {
	dir, gold := gitRepo(t, map[string]string{"calc.go": "package calc\n", "README": "r\n"}, map[string]string{"calc.go": "package calc\n\nvar X = 1\n", "README": "r\n"})
	yml, err := Script(Empty, gold, nil)
	if err != nil {
		t.Fatal(err)
	}
	if tools := play(t, dir, yml); strings.Join(tools, ",") != "finish" {
		t.Errorf("empty plays %v", tools)
	}
	yml, err = Script(Wrong, gold, nil)
	if err != nil {
		t.Fatal(err)
	}
	play(t, dir, yml)
	got, _ := os.ReadFile(filepath.Join(dir, "calc.go"))
	if string(got) != "package calc\n\n// wrench bench: a change that fixes nothing\n" {
		t.Errorf("wrong fix: %q", got)
	}
	if _, err := Script("silver", gold, nil); err == nil {
		t.Error("unknown oracle: no error")
	}
	if _, err := Script(Gold, "not a patch", nil); err == nil {
		t.Error("gold of no patch: no error")
	}
}
