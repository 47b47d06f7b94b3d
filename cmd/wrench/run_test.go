package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestRunExamples runs `wrench run` on both examples against the real Docker
// engine with their scripts, then applies the emitted patch to a fresh clone
// and runs the tests there in a sandbox.
func TestRunExamples(t *testing.T) {
	requireImage(t)
	cases := []struct{ example, test string }{
		{"go-calc", "go test ./..."},
		{"py-textstats", "python3 -m pytest -q"},
	}
	for _, c := range cases {
		t.Run(c.example, func(t *testing.T) {
			repo := gitRepo(t, c.example)
			data := t.TempDir()
			deployment := testDeployment("run")
			patch := filepath.Join(t.TempDir(), "fix.patch")
			traj := filepath.Join(t.TempDir(), "traj.jsonl")
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			script := filepath.Join(moduleRoot(t), "examples", c.example, "fix.yaml")
			_, stderr, code := runWrench(t, ctx, []string{"WRENCH_LLM_API_KEY=sk-never-leaks-123"}, "run", "--repo", repo,
				"--task", "Make the tests pass.", "--test", c.test, "--model", "scripted:"+script,
				"--out", patch, "--trajectory", traj, "--data-dir", data, "--deployment", deployment)
			if code != 0 {
				t.Fatalf("wrench run exit %d\n%s", code, stderr)
			}
			if !strings.Contains(stderr, "resolved") || !strings.Contains(stderr, "tests fail → pass") {
				t.Errorf("outcome line missing: %s", stderr)
			}
			body, err := os.ReadFile(patch)
			if err != nil || len(body) == 0 {
				t.Fatalf("no patch written: %v", err)
			}
			tr, _ := os.ReadFile(traj)
			if len(tr) == 0 || strings.Contains(string(tr), "sk-never-leaks-123") {
				t.Errorf("trajectory empty or leaks the key (%d bytes)", len(tr))
			}

			// A fresh clone of the original repository takes the patch.
			fresh := filepath.Join(t.TempDir(), "fresh")
			git(t, filepath.Dir(fresh), "clone", "-q", repo, fresh)
			git(t, fresh, "apply", "--check", patch)
			git(t, fresh, "apply", patch)
			run := exec.CommandContext(ctx, "docker", "run", "--rm", "--network", "none", "-u", "0",
				"-v", fresh+":/workspace", "-w", "/workspace", defaultImage, "bash", "-c", c.test)
			if out, err := run.CombinedOutput(); err != nil {
				t.Fatalf("tests fail after applying the patch: %v\n%s", err, out)
			}
			if n := containersOf(t, deployment); n != 0 {
				t.Errorf("%d containers left behind", n)
			}
			if n := entries(t, filepath.Join(data, "workspaces")); n != 0 {
				t.Errorf("%d workspaces left behind", n)
			}
		})
	}
}

// TestRunBadInput: each problem exits 2 with a message naming it, and
// leaves no container or workspace behind.
func TestRunBadInput(t *testing.T) {
	requireDocker(t)
	notGit := t.TempDir()
	os.WriteFile(filepath.Join(notGit, "a.txt"), []byte("x"), 0o644)
	repo := gitRepo(t, "go-calc")
	badPrompts := t.TempDir()
	os.WriteFile(filepath.Join(badPrompts, "system.tmpl"), []byte("You fix {{.Taks}}."), 0o644)
	badPrices := filepath.Join(t.TempDir(), "prices.yaml")
	os.WriteFile(badPrices, []byte("my-model: {input_per_mtok: 1}\n"), 0o644)
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"missing repo path", []string{"--repo", "/does/not/exist", "--task", "x"}, "/does/not/exist"},
		{"not a git repository", []string{"--repo", notGit, "--task", "x", "--model", "scripted:" + filepath.Join(moduleRoot(t), "examples/go-calc/fix.yaml")}, "not a git repository"},
		{"empty task", []string{"--repo", repo, "--task", "  "}, "--task"},
		{"no repo flag", []string{"--task", "x"}, "--repo"},
		{"unknown model scheme", []string{"--repo", repo, "--task", "x", "--model", "foo://bar"}, "foo"},
		{"missing script", []string{"--repo", repo, "--task", "x", "--model", "scripted:/no/such.yaml"}, "/no/such.yaml"},
		{"bad verify", []string{"--repo", repo, "--task", "x", "--verify", "sometimes"}, "--verify"},
		{"bad approve", []string{"--repo", repo, "--task", "x", "--approve", "maybe"}, "--approve"},
		{"bad mode", []string{"--repo", repo, "--task", "x", "--mode", "auto"}, "mode"},
		{"bad tool name", []string{"--repo", repo, "--task", "x", "--tools", "view,rm -rf"}, "--tools"},
		{"unknown tool", []string{"--repo", repo, "--task", "x", "--tools", "view,bsh", "--model", "scripted:" + filepath.Join(moduleRoot(t), "examples/go-calc/fix.yaml")}, `--tools: "bsh" is not a tool (tools: bash,`},
		{"text protocol without bash", []string{"--repo", repo, "--task", "x", "--protocol", "text", "--tools", "view", "--model", "scripted:" + filepath.Join(moduleRoot(t), "examples/go-calc/fix.yaml")}, "--protocol: the text protocol needs the bash tool"},
		{"prompt naming an unknown key", []string{"--repo", repo, "--task", "x", "--prompts", badPrompts, "--model", "scripted:" + filepath.Join(moduleRoot(t), "examples/go-calc/fix.yaml")}, `--prompts: agent: invalid run: render prompt system`},
		{"missing prompts dir", []string{"--repo", repo, "--task", "x", "--prompts", "/no/prompts", "--model", "scripted:" + filepath.Join(moduleRoot(t), "examples/go-calc/fix.yaml")}, "--prompts"},
		{"bad ref", []string{"--repo", repo, "--task", "x", "--ref", "no-such-branch", "--model", "scripted:" + filepath.Join(moduleRoot(t), "examples/go-calc/fix.yaml")}, "no-such-branch"},
		{"missing prices file", []string{"--repo", repo, "--task", "x", "--prices", "/no/prices.yaml", "--model", "scripted:" + filepath.Join(moduleRoot(t), "examples/go-calc/fix.yaml")}, "--prices"},
		{"bad prices file", []string{"--repo", repo, "--task", "x", "--prices", badPrices, "--model", "scripted:" + filepath.Join(moduleRoot(t), "examples/go-calc/fix.yaml")}, "output_per_mtok"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			data := t.TempDir()
			deployment := testDeployment("bad")
			args := append([]string{"run", "--data-dir", data, "--deployment", deployment}, c.args...)
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			_, stderr, code := runWrench(t, ctx, nil, args...)
			if code != exitBadInput {
				t.Fatalf("exit %d, want 2\n%s", code, stderr)
			}
			if !strings.Contains(stderr, c.want) {
				t.Errorf("stderr does not name %q:\n%s", c.want, stderr)
			}
			if n := containersOf(t, deployment); n != 0 {
				t.Errorf("%d containers left behind", n)
			}
			if n := entries(t, filepath.Join(data, "workspaces")); n != 0 {
				t.Errorf("%d workspaces left behind", n)
			}
		})
	}
}
