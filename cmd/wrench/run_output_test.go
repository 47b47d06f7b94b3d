package main

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/wrenchworks/wrench/task"
)

// TestRunChecksOutputsBeforeTheRun: an --out or --trajectory that cannot
// be written is bad input, reported before anything starts.
func TestRunChecksOutputsBeforeTheRun(t *testing.T) {
	repo := gitRepo(t, "go-calc")
	script := filepath.Join(moduleRoot(t), "examples", "go-calc", "fix.yaml")
	dir := t.TempDir()
	for flag, path := range map[string]string{
		"--out":        "/dev/null/fix.patch",                    // parent is not a directory
		"--trajectory": filepath.Join(dir, "missing", "t.jsonl"), // parent does not exist
	} {
		_, stderr, code := runDispatch(noEnv, "run", "--repo", repo, "--task", "Fix it.",
			"--model", "scripted:"+script, "--data-dir", t.TempDir(), flag, path)
		if code != exitBadInput || !strings.Contains(stderr, flag+" "+path) {
			t.Errorf("%s %s: exit %d, stderr:\n%s", flag, path, code, stderr)
		}
	}
	_, stderr, code := runDispatch(noEnv, "run", "--repo", repo, "--task", "Fix it.",
		"--model", "scripted:"+script, "--data-dir", t.TempDir(), "--out", dir)
	if code != exitBadInput || !strings.Contains(stderr, "not a regular file") {
		t.Errorf("--out DIR: exit %d, stderr:\n%s", code, stderr)
	}
}

func TestCheckWritableLeavesNothing(t *testing.T) {
	dir := t.TempDir()
	existing := filepath.Join(dir, "old.patch")
	if err := os.WriteFile(existing, []byte("keep"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{existing, filepath.Join(dir, "new.patch")} {
		if err := checkWritable("--out", p); err != nil {
			t.Errorf("%s: %v", p, err)
		}
	}
	if b, _ := os.ReadFile(existing); string(b) != "keep" {
		t.Errorf("the check changed an existing file: %q", b)
	}
	if e, _ := os.ReadDir(dir); len(e) != 1 {
		t.Errorf("the check left files behind: %v", e)
	}
}

// TestFinishedPatchIsNeverLost: when --out cannot be written after the run
// (it went away during the run), the patch and trajectory are kept in
// files of their own and the message says where.
func TestFinishedPatchIsNeverLost(t *testing.T) {
	var stdout, stderr bytes.Buffer
	env := &cliEnv{stdout: &stdout, stderr: &stderr, getenv: noEnv}
	res := task.Result{TaskID: "t-lost", Patch: "diff --git a/x b/x\n"}
	f := runFlags{out: "/dev/null/fix.patch", trajectory: "/dev/null/t.jsonl"}
	if writeRunOutput(env, f, res, []byte("{\"seq\":1}\n")) {
		t.Fatal("reported success")
	}
	saved := regexp.MustCompile(`the (\w+) is saved in (\S+) instead`).FindAllStringSubmatch(stderr.String(), -1)
	if len(saved) != 2 {
		t.Fatalf("stderr does not say where both went:\n%s", stderr.String())
	}
	want := map[string]string{"patch": res.Patch, "trajectory": "{\"seq\":1}\n"}
	for _, m := range saved {
		got, err := os.ReadFile(m[2])
		if err != nil || string(got) != want[m[1]] {
			t.Errorf("%s in %s: %q, %v", m[1], m[2], got, err)
		}
		os.Remove(m[2])
	}
}
