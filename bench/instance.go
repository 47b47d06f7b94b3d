// Package bench is Wrench's private benchmark: instances in the SWE-bench
// shape mined from a team's own history (package bench/mine), run as
// ordinary tasks with a hidden grading spec, and reported and compared.
//
// The files it reads and writes:
//
//   - instances (.json array or .jsonl): Instance, ours or SWE-bench's;
//   - predictions.jsonl: Prediction, what the SWE-bench harness accepts;
//   - results.jsonl: Result, one line per finished instance;
//   - report.md and report.json: Report.
package bench

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"sort"
	"strings"

	"github.com/bluekeyes/go-gitdiff/gitdiff"

	"github.com/wrenchworks/wrench/task"
)

// Instance is one benchmark task in the SWE-bench shape. The fields past
// Version are Wrench's: SWE-bench's harness ignores them, and instances
// from SWE-bench work without them.
type Instance struct {
	InstanceID string `json:"instance_id"`
	// Repo is "owner/name" (SWE-bench), or the repository's name.
	Repo       string `json:"repo"`
	BaseCommit string `json:"base_commit"`
	// Patch is the gold patch: the source part of the change.
	Patch string `json:"patch"`
	// TestPatch is the test part, hidden from the agent.
	TestPatch        string `json:"test_patch"`
	ProblemStatement string `json:"problem_statement"`
	HintsText        string `json:"hints_text"`
	CreatedAt        string `json:"created_at"`
	Version          string `json:"version"`
	// FailToPass and PassToPass are JSON-encoded lists of test names in
	// SWE-bench's files; TestList reads either form.
	FailToPass             TestList `json:"FAIL_TO_PASS"`
	PassToPass             TestList `json:"PASS_TO_PASS"`
	EnvironmentSetupCommit string   `json:"environment_setup_commit"`

	// RepoURL is what a worker clones (a URL or a path on the worker's
	// machine); empty means https://github.com/<Repo>.
	RepoURL string `json:"repo_url,omitempty"`
	// Commit is the commit the instance was mined from.
	Commit string `json:"commit,omitempty"`
	// TestFramework is task.FrameworkGo or task.FrameworkPytest; empty
	// means guessed from the test patch's files.
	TestFramework string `json:"test_framework,omitempty"`
	// TestFiles are the files whose tests grading runs; empty means the
	// test patch's files.
	TestFiles []string `json:"test_files,omitempty"`
	// TestCommand is the repository's whole test command, run before and
	// after the agent like any task's (empty: none).
	TestCommand string `json:"test_command,omitempty"`
	// EnvironmentKey identifies the environment the instance was validated
	// on (the worker's setup snapshot key), when there was one.
	EnvironmentKey string `json:"environment_key,omitempty"`
	// ProblemSource says where ProblemStatement came from: "commit" (the
	// commit message) or "issue" (the pull request's linked issue).
	ProblemSource string `json:"problem_source,omitempty"`
}

// TestList is a list of test names. It reads a JSON list or a string
// holding one (SWE-bench's form) and writes the string form.
type TestList []string

// MarshalJSON writes the list as a JSON-encoded string, as SWE-bench does.
func (l TestList) MarshalJSON() ([]byte, error) {
	inner, err := json.Marshal([]string(nonNil(l)))
	if err != nil {
		return nil, err
	}
	return json.Marshal(string(inner))
}

// UnmarshalJSON reads a JSON list or a string holding one.
func (l *TestList) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		if strings.TrimSpace(s) == "" {
			*l = nil
			return nil
		}
		b = []byte(s)
	}
	var list []string
	if err := json.Unmarshal(b, &list); err != nil {
		return fmt.Errorf("test list: want a list of strings (or a string holding one): %w", err)
	}
	*l = list
	return nil
}

func nonNil(l []string) []string {
	if l == nil {
		return []string{}
	}
	return l
}

// CloneURL is where a worker clones the instance's repository from.
func (in *Instance) CloneURL() string {
	if in.RepoURL != "" {
		return in.RepoURL
	}
	return "https://github.com/" + in.Repo
}

// Framework is the instance's test framework, guessed from the test
// patch's files when the instance does not say.
func (in *Instance) Framework() string {
	if in.TestFramework != "" {
		return in.TestFramework
	}
	return FrameworkOf(PatchFiles(in.TestPatch))
}

// Files are the test files grading runs.
func (in *Instance) Files() []string {
	if len(in.TestFiles) > 0 {
		return in.TestFiles
	}
	return PatchFiles(in.TestPatch)
}

// FrameworkOf guesses the test framework of files: Go when any is a Go
// test, pytest when any is Python; "" when neither.
func FrameworkOf(files []string) string {
	var goTests, py bool
	for _, f := range files {
		switch {
		case strings.HasSuffix(f, "_test.go"):
			goTests = true
		case path.Ext(f) == ".py":
			py = true
		}
	}
	switch {
	case goTests && !py:
		return task.FrameworkGo
	case py && !goTests:
		return task.FrameworkPytest
	}
	return ""
}

// PatchFiles lists the files a unified diff changes (the new name, or the
// old one of a deletion), in patch order; nil when it does not parse.
func PatchFiles(patch string) []string {
	files, _, err := gitdiff.Parse(strings.NewReader(patch))
	if err != nil {
		return nil
	}
	var out []string
	seen := map[string]bool{}
	for _, f := range files {
		p := f.NewName
		if f.IsDelete || p == "" || p == "/dev/null" {
			p = f.OldName
		}
		if p != "" && p != "/dev/null" && !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	return out
}

// Validate says what is missing for an instance to run.
func (in *Instance) Validate() error {
	var miss []string
	for name, v := range map[string]string{"instance_id": in.InstanceID, "base_commit": in.BaseCommit, "test_patch": in.TestPatch, "problem_statement": in.ProblemStatement} {
		if strings.TrimSpace(v) == "" {
			miss = append(miss, name)
		}
	}
	if in.Repo == "" && in.RepoURL == "" {
		miss = append(miss, "repo")
	}
	if len(in.FailToPass) == 0 {
		miss = append(miss, "FAIL_TO_PASS")
	}
	if len(miss) > 0 {
		return fmt.Errorf("instance %q: missing %s", in.InstanceID, strings.Join(sorted(miss), ", "))
	}
	if in.Framework() == "" {
		return fmt.Errorf("instance %q: cannot tell the test framework (set test_framework to go or pytest)", in.InstanceID)
	}
	if len(in.Files()) == 0 {
		return fmt.Errorf("instance %q: the test patch names no file", in.InstanceID)
	}
	if len(in.TestPatch) > task.MaxTestPatchBytes {
		return fmt.Errorf("instance %q: the test patch is %d bytes; the limit is %d", in.InstanceID, len(in.TestPatch), task.MaxTestPatchBytes)
	}
	if n := len(in.FailToPass) + len(in.PassToPass); n > task.MaxGradingTests {
		return fmt.Errorf("instance %q: names %d tests; the limit is %d", in.InstanceID, n, task.MaxGradingTests)
	}
	return nil
}

// maxInstanceLine bounds one line of a .jsonl instances file.
const maxInstanceLine = 64 << 20

// ReadInstances reads instances from a .json file (an array) or a .jsonl
// file (one object a line), by content: a file starting with "[" is an
// array. Duplicate instance ids are an error.
func ReadInstances(file string) ([]Instance, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, fmt.Errorf("read instances: %w", err)
	}
	defer f.Close()
	ins, err := DecodeInstances(f)
	if err != nil {
		return nil, fmt.Errorf("read instances %s: %w", file, err)
	}
	return ins, nil
}

// DecodeInstances reads a JSON array or JSON lines of instances.
func DecodeInstances(r io.Reader) ([]Instance, error) {
	br := bufio.NewReaderSize(r, 64<<10)
	first, err := firstNonSpace(br)
	if err != nil {
		return nil, err
	}
	var ins []Instance
	if first == '[' {
		if err := json.NewDecoder(br).Decode(&ins); err != nil {
			return nil, err
		}
	} else {
		sc := bufio.NewScanner(br)
		sc.Buffer(make([]byte, 64<<10), maxInstanceLine)
		for n := 1; sc.Scan(); n++ {
			line := bytes.TrimSpace(sc.Bytes())
			if len(line) == 0 {
				continue
			}
			var in Instance
			if err := json.Unmarshal(line, &in); err != nil {
				return nil, fmt.Errorf("line %d: %w", n, err)
			}
			ins = append(ins, in)
		}
		if err := sc.Err(); err != nil {
			return nil, err
		}
	}
	seen := map[string]bool{}
	for _, in := range ins {
		if seen[in.InstanceID] {
			return nil, fmt.Errorf("instance id %q appears twice", in.InstanceID)
		}
		seen[in.InstanceID] = true
	}
	return ins, nil
}

func firstNonSpace(br *bufio.Reader) (byte, error) {
	for {
		b, err := br.ReadByte()
		if errors.Is(err, io.EOF) {
			return 0, errors.New("no instances")
		}
		if err != nil {
			return 0, err
		}
		if b != ' ' && b != '\n' && b != '\r' && b != '\t' {
			return b, br.UnreadByte()
		}
	}
}

// WriteJSONL writes one JSON object per line.
func WriteJSONL[T any](w io.Writer, items []T) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	for i := range items {
		if err := enc.Encode(&items[i]); err != nil {
			return err
		}
	}
	return nil
}

func sorted(s []string) []string {
	out := append([]string(nil), s...)
	sort.Strings(out)
	return out
}

// Instruction is a problem statement cut to what a task accepts.
func Instruction(problem string) string {
	const note = "\n\n[problem statement truncated]"
	if len(problem) <= task.MaxInstructionBytes {
		return problem
	}
	return strings.ToValidUTF8(problem[:task.MaxInstructionBytes-len(note)], "") + note
}
