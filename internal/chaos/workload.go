package chaos

import (
	"crypto/rand"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/wrenchworks/wrench/task"
)

// shape is what a task does, chosen so that the fault aimed at it can land
// in the phase it names.
type shape string

const (
	// shapeQuick writes FIXED and finishes: two model turns.
	shapeQuick shape = "quick"
	// shapeLong appends six lines in six turns (a save point at turn 5),
	// waits on the model at turn 7 and checks every line is there before
	// it finishes: a worker killed at turn 7 leaves work to resume.
	shapeLong shape = "long"
	// shapeSlowVerify is quick with a test command that takes two
	// seconds, so that a verify phase is long enough to hit.
	shapeSlowVerify shape = "slow-verify"
	// shapeBigClone is quick on a repository of its own with a large
	// blob, so that its clone takes long enough to hit.
	shapeBigClone shape = "big-clone"
)

// quickScript and longScript are the scripted model's scripts
// (docs/scripted-model.md).
const quickScript = `steps:
  - tool_calls: [{name: bash, arguments: {command: "echo fixed > FIXED && echo wrote-it"}}]
  - expect_observation: "wrote-it"
    tool_calls: [{name: finish, arguments: {summary: "Wrote FIXED."}}]
`

const longScript = `steps:
  - tool_calls: [{name: bash, arguments: {command: "echo fixed > FIXED && echo s1 >> log.txt"}}]
  - tool_calls: [{name: bash, arguments: {command: "echo s2 >> log.txt"}}]
  - tool_calls: [{name: bash, arguments: {command: "echo s3 >> log.txt"}}]
  - tool_calls: [{name: bash, arguments: {command: "echo s4 >> log.txt"}}]
  - tool_calls: [{name: bash, arguments: {command: "echo s5 >> log.txt"}}]
  - tool_calls: [{name: bash, arguments: {command: "echo s6 >> log.txt"}}]
  - fault: {delay: 3s}
    tool_calls: [{name: bash, arguments: {command: "cat log.txt"}}]
  - expect_observation: "s1\\ns2\\ns3\\ns4\\ns5\\ns6$"
    tool_calls: [{name: finish, arguments: {summary: "Logged six lines."}}]
`

// pricesFile prices the scripted model like a small commercial one, so
// that spend and its caps are not zero.
const pricesFile = "scripted: {input_per_mtok: 2.5, output_per_mtok: 10}\n"

// Caps per shape: well above what one clean run spends (measured: quick
// about 1,500 tokens, long about 14,000), so that only spend counted
// wrongly across attempts, or an attempt run twice to effect, reaches
// them.
var caps = map[shape]task.Limits{
	shapeQuick:      {MaxTokens: 20000, MaxCostUSD: 0.05},
	shapeSlowVerify: {MaxTokens: 20000, MaxCostUSD: 0.05},
	shapeBigClone:   {MaxTokens: 20000, MaxCostUSD: 0.05},
	shapeLong:       {MaxTokens: 60000, MaxCostUSD: 0.2},
}

// workload is the material of a run: repositories and scripts on disk.
type workload struct {
	dir    string
	repos  []string // small shared repositories
	quick  string   // script files
	long   string
	prices string
}

// newWorkload creates n small repositories and the scripts under dir.
func newWorkload(dir string, n int) (*workload, error) {
	w := &workload{dir: dir, quick: filepath.Join(dir, "quick.yaml"), long: filepath.Join(dir, "long.yaml"),
		prices: filepath.Join(dir, "prices.yaml")}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("create %s: %w", dir, err)
	}
	for path, body := range map[string]string{w.quick: quickScript, w.long: longScript, w.prices: pricesFile} {
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			return nil, fmt.Errorf("write %s: %w", path, err)
		}
	}
	for i := range n {
		repo := filepath.Join(dir, "repos", fmt.Sprintf("small-%d", i))
		files := map[string]string{"README": fmt.Sprintf("small repository %d\n", i),
			"main.txt": strings.Repeat(fmt.Sprintf("line of repository %d\n", i), 50)}
		if err := makeRepo(repo, files, 0); err != nil {
			return nil, err
		}
		w.repos = append(w.repos, repo)
	}
	return w, nil
}

// bigRepo creates a repository of its own for task id with a blob of size
// random bytes (which no compression shrinks).
func (w *workload) bigRepo(id string, size int) (string, error) {
	repo := filepath.Join(w.dir, "repos", "big-"+id)
	return repo, makeRepo(repo, map[string]string{"README": "a repository with a large blob\n"}, size)
}

// task builds task id of shape s on repository repo.
func (w *workload) task(id string, s shape, repo string) task.Task {
	t := task.Task{ID: id, Repo: task.Repo{URL: repo}, Instruction: "Write FIXED.",
		TestCommand: "test -f FIXED", Model: "scripted:" + w.quick, Limits: caps[s], Source: task.Source{Kind: "api"}}
	switch s {
	case shapeLong:
		t.Instruction, t.Model = "Log six lines.", "scripted:"+w.long
	case shapeSlowVerify:
		t.TestCommand = "sleep 2; test -f FIXED"
	}
	return t
}

// makeRepo creates a git repository at dir with files and, when blob > 0,
// a file of that many random bytes, in one commit on main.
func makeRepo(dir string, files map[string]string, blob int) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			return fmt.Errorf("write %s: %w", name, err)
		}
	}
	if blob > 0 {
		b := make([]byte, blob)
		_, _ = rand.Read(b)
		if err := os.WriteFile(filepath.Join(dir, "blob.bin"), b, 0o644); err != nil {
			return fmt.Errorf("write blob: %w", err)
		}
	}
	for _, args := range [][]string{
		{"init", "-q", "-b", "main"},
		{"add", "-A"},
		{"-c", "user.name=chaos", "-c", "user.email=chaos@example.com", "commit", "-qm", "initial"},
	} {
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("git %s in %s: %v: %s", strings.Join(args, " "), dir, err, out)
		}
	}
	return nil
}
