// Package oracle writes the scripts of the built-in bench "models": each is
// a script for the scripted model (package llm/scripted), so an oracle runs
// through the same queue, worker, agent loop and tools as a real model.
//
//   - gold replays the instance's own source patch through the agent's
//     patch tool (apply_patch format); a file that format cannot express
//     exactly (no newline at the end, carriage returns, mode changes, a new
//     executable or symbolic link, binary content, or a hunk whose context
//     would match elsewhere first)
//     goes through `git apply` in the bash tool instead;
//   - empty finishes at once, changing nothing;
//   - wrong makes a change that fixes nothing: it appends a comment to the
//     first file of the gold patch.
//
// SWE-bench validates its harness the same way: the gold patch must
// resolve every instance and the empty one none.
package oracle

import (
	"bytes"
	"fmt"
	"os"
	"path"
	"strings"

	"github.com/bluekeyes/go-gitdiff/gitdiff"
	"gopkg.in/yaml.v3"

	"github.com/wrenchworks/wrench/agent"
	"github.com/wrenchworks/wrench/agent/editformat"
)

// The oracle model names.
const (
	Gold  = "gold"
	Empty = "empty"
	Wrong = "wrong"
)

// Is reports whether name is an oracle.
func Is(name string) bool { return name == Gold || name == Empty || name == Wrong }

// BaseReader reads a file as it is at the instance's base commit; it
// returns an error wrapping fs.ErrNotExist for a missing file. Nil means
// the base is not at hand and the gold script is written without the check.
type BaseReader func(path string) ([]byte, error)

// Script returns the scripted-model script (YAML) of oracle name for an
// instance whose gold patch is goldPatch.
func Script(name, goldPatch string, base BaseReader) ([]byte, error) {
	var steps []step
	switch name {
	case Gold:
		s, err := goldSteps(goldPatch, base)
		if err != nil {
			return nil, err
		}
		steps = s
	case Empty:
	case Wrong:
		steps = wrongSteps(goldPatch)
	default:
		return nil, fmt.Errorf("oracle: unknown oracle %q (gold, empty, wrong)", name)
	}
	steps = append(steps, step{Content: "Done.", ToolCalls: []call{{Name: agent.ToolFinish, Arguments: map[string]any{"summary": name + " oracle: done"}}}})
	return yaml.Marshal(script{Model: "oracle-" + name, Final: "(" + name + " oracle: no more steps)", Steps: steps})
}

// script mirrors the scripted model's YAML.
type script struct {
	Model string `yaml:"model"`
	Final string `yaml:"final"`
	Steps []step `yaml:"steps"`
}

type step struct {
	Content   string `yaml:"content,omitempty"`
	ToolCalls []call `yaml:"tool_calls"`
}

type call struct {
	Name      string         `yaml:"name"`
	Arguments map[string]any `yaml:"arguments"`
}

func goldSteps(goldPatch string, base BaseReader) ([]step, error) {
	files, _, err := gitdiff.Parse(strings.NewReader(goldPatch))
	if err != nil {
		return nil, fmt.Errorf("oracle: gold patch: %w", err)
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("oracle: the gold patch changes no file")
	}
	var views []call
	var ap strings.Builder
	var rest []*gitdiff.File
	for _, f := range files {
		text, ok := applyPatchOf(f)
		if ok && base != nil {
			ok = sameResult(f, text, base)
		}
		if !ok {
			rest = append(rest, f)
			continue
		}
		if !f.IsNew {
			views = append(views, call{Name: agent.ToolView, Arguments: map[string]any{"path": f.OldName}})
		}
		ap.WriteString(text)
	}
	var steps []step
	if len(views) > 0 {
		steps = append(steps, step{Content: "Reading the files the gold patch changes.", ToolCalls: views})
	}
	if ap.Len() > 0 {
		steps = append(steps, step{Content: "Applying the gold patch.", ToolCalls: []call{{Name: agent.ToolPatch,
			Arguments: map[string]any{"patch_text": "*** Begin Patch\n" + ap.String() + "*** End Patch\n"}}}})
	}
	if len(rest) > 0 {
		var sub strings.Builder
		for _, f := range rest {
			sub.WriteString(f.String())
		}
		steps = append(steps, step{Content: "Applying the rest with git apply.", ToolCalls: []call{{Name: agent.ToolBash,
			Arguments: map[string]any{"command": gitApply(sub.String())}}}})
	}
	return steps, nil
}

// applyPatchOf renders one file's change in the apply_patch format, or
// says it cannot be rendered exactly.
func applyPatchOf(f *gitdiff.File) (string, bool) {
	if f.IsBinary || f.IsCopy || (f.OldMode != 0 && f.NewMode != 0 && f.OldMode != f.NewMode) || (f.IsRename && len(f.TextFragments) == 0) {
		return "", false
	}
	// The patch tool writes regular, non-executable files.
	for _, m := range []os.FileMode{f.OldMode, f.NewMode} {
		if m != 0 && m != 0o100644 {
			return "", false
		}
	}
	for _, frag := range f.TextFragments {
		for _, l := range frag.Lines {
			if !strings.HasSuffix(l.Line, "\n") || strings.ContainsRune(l.Line, '\r') {
				return "", false
			}
		}
	}
	var b strings.Builder
	switch {
	case f.IsDelete:
		fmt.Fprintf(&b, "*** Delete File: %s\n", f.OldName)
	case f.IsNew:
		fmt.Fprintf(&b, "*** Add File: %s\n", f.NewName)
		for _, frag := range f.TextFragments {
			for _, l := range frag.Lines {
				b.WriteString("+" + l.Line)
			}
		}
	default:
		if len(f.TextFragments) == 0 {
			return "", false
		}
		fmt.Fprintf(&b, "*** Update File: %s\n", f.OldName)
		if f.IsRename {
			fmt.Fprintf(&b, "*** Move to: %s\n", f.NewName)
		}
		for _, frag := range f.TextFragments {
			b.WriteString("@@\n")
			for _, l := range frag.Lines {
				b.WriteString(l.Op.String() + l.Line)
			}
		}
	}
	return b.String(), true
}

// sameResult checks that the apply_patch rendering of f, applied to the
// base as the patch tool applies it, gives what git gives.
func sameResult(f *gitdiff.File, text string, base BaseReader) bool {
	var src []byte
	if !f.IsNew {
		b, err := base(f.OldName)
		if err != nil {
			return false
		}
		src = b
	}
	var want bytes.Buffer
	if !f.IsDelete {
		if err := gitdiff.Apply(&want, bytes.NewReader(src), f); err != nil {
			return false
		}
	}
	read := func(name string) ([]byte, error) {
		if path.Clean(name) == path.Clean(f.OldName) && !f.IsNew {
			return src, nil
		}
		return base(name)
	}
	changes, err := editformat.ApplyPatch("*** Begin Patch\n"+text+"*** End Patch\n", read, editformat.PatchOptions{MaxFuzz: editformat.MaxFuzzExact})
	if err != nil {
		return false
	}
	for _, c := range changes {
		if path.Clean(c.Path) == path.Clean(f.NewName) || (f.IsDelete && path.Clean(c.Path) == path.Clean(f.OldName)) {
			if f.IsDelete {
				return c.After == nil
			}
			return bytes.Equal(c.After, want.Bytes())
		}
	}
	return false
}

// gitApply is a bash command applying patch with git, through a heredoc
// whose delimiter the patch does not contain.
func gitApply(patch string) string {
	delim := "WRENCH_GOLD_PATCH"
	for i := 0; strings.Contains(patch, delim); i++ {
		delim = fmt.Sprintf("WRENCH_GOLD_PATCH_%d", i)
	}
	if !strings.HasSuffix(patch, "\n") {
		patch += "\n"
	}
	return "git apply --whitespace=nowarn <<'" + delim + "'\n" + patch + delim
}

// wrongSteps append a comment to the first file the gold patch changes
// (or create it): a change, and no fix.
func wrongSteps(goldPatch string) []step {
	target := "WRONG_FIX.txt"
	if files, _, err := gitdiff.Parse(strings.NewReader(goldPatch)); err == nil && len(files) > 0 {
		target = files[0].NewName
		if files[0].IsDelete {
			target = files[0].OldName
		}
	}
	comment := "\n# wrench bench: a change that fixes nothing\n"
	switch path.Ext(target) {
	case ".go", ".js", ".ts", ".java", ".c", ".h", ".cc", ".cpp", ".rs", ".swift", ".kt", ".scala", ".cs":
		comment = "\n// wrench bench: a change that fixes nothing\n"
	}
	cmd := fmt.Sprintf("mkdir -p %s && printf %%s %s >> %s", shellQuote(path.Dir(target)), shellQuote(comment), shellQuote(target))
	return []step{{Content: "Making a change that does not fix the issue.", ToolCalls: []call{{Name: agent.ToolBash, Arguments: map[string]any{"command": cmd}}}}}
}

func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
