package mine

import (
	"bytes"
	"fmt"
	"reflect"
	"strings"
	"time"

	"github.com/go-git/go-git/v5/plumbing/format/diff"
	"github.com/go-git/go-git/v5/plumbing/object"

	"github.com/wrenchworks/wrench/bench"
)

// The reasons a commit is not a candidate or a candidate is dropped.
const (
	SkipMerge       = "merge commit"
	SkipRoot        = "root commit"
	SkipNoTests     = "no test file changed"
	SkipNoSource    = "no source file changed"
	SkipBinary      = "binary file changed"
	SkipSubmodule   = "submodule changed"
	SkipTooLarge    = "change too large"
	SkipFramework   = "tests of no supported framework (go test, pytest)"
	DropNoGold      = "the gold patch did not apply through the agent"
	DropNoPass      = "no test passes with the gold patch"
	DropNoF2P       = "no FAIL_TO_PASS test (the new tests pass without the fix)"
	DropGrading     = "grading could not run"
	DropInfra       = "the task failed (infrastructure or setup)"
	DropUnconfirmed = "not reproducible: the named tests do not all pass again with the gold patch"
)

// limits of a candidate's change.
type limits struct {
	maxPatchBytes int
	maxFiles      int
}

// candidate turns a commit into an instance without its test lists, or
// says why it is not one.
func candidate(c *object.Commit, name, cloneURL string, lim limits) (bench.Instance, string, error) {
	switch c.NumParents() {
	case 0:
		return bench.Instance{}, SkipRoot, nil
	case 1:
	default:
		return bench.Instance{}, SkipMerge, nil
	}
	parent, err := c.Parent(0)
	if err != nil {
		return bench.Instance{}, "", fmt.Errorf("parent of %s: %w", c.Hash, err)
	}
	p, err := parent.Patch(c)
	if err != nil {
		return bench.Instance{}, "", fmt.Errorf("diff %s: %w", c.Hash, err)
	}
	var src, tests []diff.FilePatch
	var testFiles []string
	code := 0
	for _, fp := range p.FilePatches() {
		from, to := fp.Files()
		if !present(from) && !present(to) {
			// go-git gives a submodule change no file on either side.
			return bench.Instance{}, SkipSubmodule, nil
		}
		pth := filePath(from, to)
		if IsTestPath(pth) {
			tests = append(tests, fp)
			testFiles = append(testFiles, pth)
			continue
		}
		if fp.IsBinary() {
			return bench.Instance{}, SkipBinary, nil
		}
		src = append(src, fp)
		if IsCodePath(pth) {
			code++
		}
	}
	switch {
	case len(tests) == 0:
		return bench.Instance{}, SkipNoTests, nil
	case code == 0:
		return bench.Instance{}, SkipNoSource, nil
	case len(src)+len(tests) > lim.maxFiles:
		return bench.Instance{}, SkipTooLarge, nil
	}
	fw := bench.FrameworkOf(testFiles)
	if fw == "" {
		return bench.Instance{}, SkipFramework, nil
	}
	for _, fp := range tests {
		if fp.IsBinary() {
			return bench.Instance{}, SkipBinary, nil
		}
	}
	gold, err := encode(src)
	if err != nil {
		return bench.Instance{}, "", err
	}
	testPatch, err := encode(tests)
	if err != nil {
		return bench.Instance{}, "", err
	}
	if len(gold)+len(testPatch) > lim.maxPatchBytes {
		return bench.Instance{}, SkipTooLarge, nil
	}
	return bench.Instance{
		InstanceID:       InstanceID(name, c.Hash.String()),
		Repo:             name,
		RepoURL:          cloneURL,
		BaseCommit:       parent.Hash.String(),
		Commit:           c.Hash.String(),
		Patch:            gold,
		TestPatch:        testPatch,
		ProblemStatement: strings.TrimSpace(c.Message),
		ProblemSource:    "commit",
		CreatedAt:        c.Author.When.UTC().Format(time.RFC3339),
		TestFramework:    fw,
	}, "", nil
}

// InstanceID is the id of the instance mined from commit sha of name
// ("owner/repo"): SWE-bench's "owner__repo-…" with the short sha.
func InstanceID(name, sha string) string {
	if len(sha) > 12 {
		sha = sha[:12]
	}
	return strings.ReplaceAll(name, "/", "__") + "-" + sha
}

// filePath is the path a file patch changes: its new path, or the old one
// of a deletion. go-git gives the missing side as a typed nil.
func filePath(from, to diff.File) string {
	if present(to) {
		return to.Path()
	}
	return from.Path()
}

func present(f diff.File) bool {
	if f == nil {
		return false
	}
	v := reflect.ValueOf(f)
	return v.Kind() != reflect.Pointer || !v.IsNil()
}

// subset is a diff.Patch of some of a commit's file patches.
type subset []diff.FilePatch

// FilePatches returns the file patches of the subset.
func (s subset) FilePatches() []diff.FilePatch { return s }

// Message is empty: the subset has no header text.
func (s subset) Message() string { return "" }

// encode renders file patches as a unified diff `git apply` accepts.
func encode(fps []diff.FilePatch) (string, error) {
	if len(fps) == 0 {
		return "", nil
	}
	var b bytes.Buffer
	if err := diff.NewUnifiedEncoder(&b, diff.DefaultContextLines).Encode(subset(fps)); err != nil {
		return "", fmt.Errorf("encode patch: %w", err)
	}
	return b.String(), nil
}
