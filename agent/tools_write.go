package agent

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"strings"

	"github.com/wrenchworks/wrench/agent/editformat"
)

// maxPatchFuzz is the loosest context match a patch may use: whitespace
// differences pass, typographic punctuation does not.
const maxPatchFuzz = editformat.FuzzWhitespace

var editTool = &tool{
	name: ToolEdit,
	desc: "Edit one file. Replace: old_string must occur exactly once in the file (include enough surrounding lines to make it unique) and is replaced by new_string. Create: empty old_string and the full content as new_string; the file must not exist. Delete text: empty new_string. The file must have been viewed and not changed since. Returns a unified diff.",
	params: `{"type":"object","properties":{` +
		`"path":{"type":"string","description":"file path, relative to the workspace"},` +
		`"old_string":{"type":"string","description":"exact text to replace, including whitespace; empty to create a file"},` +
		`"new_string":{"type":"string","description":"replacement text; empty to delete old_string"}},` +
		`"required":["path","old_string","new_string"]}`,
	required: []string{"path", "old_string", "new_string"},
	run:      runEdit,
}

func runEdit(ctx context.Context, s *runState, raw json.RawMessage) toolResult {
	a, bad := args[struct {
		Path string `json:"path"`
		Old  string `json:"old_string"`
		New  string `json:"new_string"`
	}](ToolEdit, raw)
	if bad != nil {
		return *bad
	}
	p, before, exists, fail := s.openForWrite(ctx, a.Path, false)
	if fail != nil {
		return *fail
	}
	if a.Old == "" {
		if exists {
			return errorResult("%s already exists. To change it, view it and give the text to replace as old_string; to overwrite it whole, use write.", p)
		}
		return s.writeFile(ctx, ToolEdit, p, nil, []byte(a.New))
	}
	if !exists {
		return errorResult("%s does not exist. To create it, call edit with an empty old_string and the content as new_string.", p)
	}
	if r := s.checkFresh(p, before); r != nil {
		return *r
	}
	if a.Old == a.New {
		return errorResult("old_string and new_string are identical: nothing to change.")
	}
	after, err := editformat.Replace(before, a.Old, a.New)
	if err != nil {
		var me *editformat.MatchError
		if errors.As(err, &me) {
			return errorResult("in %s: %v", p, me)
		}
		return errorResult("edit %s: %v", p, err)
	}
	return s.writeFile(ctx, ToolEdit, p, before, after)
}

var writeTool = &tool{
	name: ToolWrite,
	desc: "Write a whole file, creating it (and its directories) or replacing its content. An existing file must have been viewed and not changed since. Returns a unified diff; nothing is written when the content is unchanged.",
	params: `{"type":"object","properties":{` +
		`"path":{"type":"string","description":"file path, relative to the workspace"},` +
		`"content":{"type":"string","description":"the complete new content"}},` +
		`"required":["path","content"]}`,
	required: []string{"path", "content"},
	run:      runWrite,
}

func runWrite(ctx context.Context, s *runState, raw json.RawMessage) toolResult {
	a, bad := args[struct {
		Path    string `json:"path"`
		Content string `json:"content"`
	}](ToolWrite, raw)
	if bad != nil {
		return *bad
	}
	p, before, exists, fail := s.openForWrite(ctx, a.Path, true)
	if fail != nil {
		return *fail
	}
	if exists && bytes.Equal(before, []byte(a.Content)) {
		return toolResult{output: fmt.Sprintf("No change: %s already has this content.", p)}
	}
	return s.writeFile(ctx, ToolWrite, p, before, []byte(a.Content))
}

var patchTool = &tool{
	name: ToolPatch,
	desc: "Apply a multi-file patch in the apply_patch format: *** Begin Patch, then *** Add File: path (lines prefixed +), *** Update File: path (optional *** Move to: path, then @@ chunks of ' ' context, '-' removed and '+' added lines), *** Delete File: path, and *** End Patch. Files updated or deleted must have been viewed and not changed since; added files must not exist. All or nothing. Returns unified diffs.",
	params: `{"type":"object","properties":{` +
		`"patch_text":{"type":"string","description":"the whole patch, from *** Begin Patch to *** End Patch"}},` +
		`"required":["patch_text"]}`,
	required: []string{"patch_text"},
	run:      runPatch,
}

func runPatch(ctx context.Context, s *runState, raw json.RawMessage) toolResult {
	a, bad := args[struct {
		Text string `json:"patch_text"`
	}](ToolPatch, raw)
	if bad != nil {
		return *bad
	}
	var fatal error
	read := func(name string) ([]byte, error) {
		p, err := cleanPath(name)
		if err != nil {
			return nil, err
		}
		b, err := s.r.Env.ReadFile(ctx, p)
		if err == nil {
			return b, nil
		}
		if ctx.Err() != nil || errors.Is(err, ErrEnvFailed) {
			fatal = err
			return nil, err
		}
		if !errors.Is(err, fs.ErrNotExist) {
			if fi, serr := s.r.Env.Stat(ctx, p); serr == nil && fi.IsDir {
				return nil, fmt.Errorf("%s: %w", p, editformat.ErrIsDir)
			}
		}
		return nil, err
	}
	changes, err := editformat.ApplyPatch(a.Text, read, editformat.PatchOptions{MaxFuzz: maxPatchFuzz})
	if fatal != nil {
		return s.envFailure(ctx, "patch", fatal)
	}
	if err != nil {
		return errorResult("%v. Nothing was changed.", err)
	}
	if len(changes) == 0 {
		return errorResult("the patch changes nothing.")
	}
	// Read-before-edit for every existing file the patch touches (its
	// first change holds the content on disk).
	checked := map[string]bool{}
	for _, c := range changes {
		src := c.Path
		if c.From != "" {
			src = c.From
		}
		p, err := cleanPath(src)
		if err != nil {
			return errorResult("%v", err)
		}
		if checked[p] {
			continue
		}
		checked[p] = true
		if c.Before == nil {
			continue
		}
		if r := s.checkFresh(p, c.Before); r != nil {
			r.output += " Nothing was changed."
			return *r
		}
	}
	if s.r.Approval == ApproveConfirm {
		req := ApprovalRequest{Call: s.call}
		var all strings.Builder
		for _, c := range changes {
			d, _, _ := editformat.UnifiedDiff(cmp.Or(c.Path, c.From), c.Before, c.After)
			req.Paths = append(req.Paths, changeName(cmp.Or(c.From, c.Path), c.Path))
			all.WriteString(d)
		}
		req.Diff = all.String()
		if r := s.approve(ctx, req); r != nil {
			return *r
		}
	}
	var out strings.Builder
	var changed []string
	for i, c := range changes {
		dst, err := cleanPath(c.Path)
		if err != nil {
			return errorResult("%v", err)
		}
		src := dst
		if c.From != "" {
			if src, err = cleanPath(c.From); err != nil {
				return errorResult("%v", err)
			}
		}
		if err := s.applyChange(ctx, src, dst, c.After); err != nil {
			s.undoChanges(ctx, changes[:i])
			return s.envFailure(ctx, "patch "+dst, err)
		}
		changed = append(changed, dst)
		if src != dst {
			changed = append(changed, src)
			s.recordWrite(src, ToolPatch, c.Before, nil)
			s.recordWrite(dst, ToolPatch, nil, c.After)
		} else {
			s.recordWrite(dst, ToolPatch, c.Before, c.After)
		}
		if c.After != nil {
			s.markSeen(dst, c.After)
		} else {
			delete(s.seen, dst)
		}
		if src != dst {
			delete(s.seen, src)
		}
		diff, added, removed := editformat.UnifiedDiff(dst, c.Before, c.After)
		fmt.Fprintf(&out, "%s %s: +%d -%d", changeVerb(c.Before, c.After, src != dst), changeName(src, dst), added, removed)
		if c.Fuzz > editformat.FuzzExact {
			out.WriteString(" (context matched ignoring whitespace)")
		}
		out.WriteString("\n")
		out.WriteString(diff)
		if !strings.HasSuffix(diff, "\n") {
			out.WriteString("\n")
		}
	}
	return toolResult{output: capOutput(strings.TrimRight(out.String(), "\n"), s.a.cfg.MaxOutputChars, 0), changed: changed}
}

func changeVerb(before, after []byte, moved bool) string {
	switch {
	case moved:
		return "Moved"
	case before == nil:
		return "Created"
	case after == nil:
		return "Deleted"
	}
	return "Updated"
}

func changeName(src, dst string) string {
	if src == dst {
		return dst
	}
	return src + " -> " + dst
}

// applyChange writes (or, with nil after, deletes) dst and removes src
// when the change is a move.
func (s *runState) applyChange(ctx context.Context, src, dst string, after []byte) error {
	if after == nil {
		return s.r.Env.Remove(ctx, dst)
	}
	if err := s.r.Env.WriteFile(ctx, dst, after, 0); err != nil {
		return err
	}
	if src != dst {
		return s.r.Env.Remove(ctx, src)
	}
	return nil
}

// undoChanges puts back what a failed patch already wrote, best effort.
func (s *runState) undoChanges(ctx context.Context, done []editformat.Change) {
	for i := len(done) - 1; i >= 0; i-- {
		c := done[i]
		dst, _ := cleanPath(c.Path)
		src := dst
		if c.From != "" {
			src, _ = cleanPath(c.From)
		}
		if c.Before != nil {
			_ = s.r.Env.WriteFile(ctx, src, c.Before, 0)
		}
		if c.Before == nil || src != dst {
			_ = s.r.Env.Remove(ctx, dst)
		}
	}
}

var searchReplaceTool = &tool{
	name: ToolSearchReplace,
	desc: "Edit one file with one or more SEARCH/REPLACE blocks, applied in order:\n------- SEARCH\n[exact lines to find]\n=======\n[replacement lines]\n+++++++ REPLACE\nSEARCH must copy the file's lines exactly (whitespace included) with enough context to be unique. An empty SEARCH replaces the whole file (or creates it); an empty REPLACE deletes. An existing file must have been viewed and not changed since. Returns a unified diff.",
	params: `{"type":"object","properties":{` +
		`"path":{"type":"string","description":"file path, relative to the workspace"},` +
		`"diff":{"type":"string","description":"one or more SEARCH/REPLACE blocks"}},` +
		`"required":["path","diff"]}`,
	required: []string{"path", "diff"},
	run:      runSearchReplace,
}

func runSearchReplace(ctx context.Context, s *runState, raw json.RawMessage) toolResult {
	a, bad := args[struct {
		Path string `json:"path"`
		Diff string `json:"diff"`
	}](ToolSearchReplace, raw)
	if bad != nil {
		return *bad
	}
	p, before, exists, fail := s.openForWrite(ctx, a.Path, true)
	if fail != nil {
		return *fail
	}
	after, infos, err := editformat.ApplySearchReplace(before, a.Diff)
	if err != nil {
		return errorResult("%s: %v. Nothing was changed.", p, err)
	}
	if exists && bytes.Equal(before, after) {
		return toolResult{output: fmt.Sprintf("No change: the blocks leave %s as it was.", p)}
	}
	r := s.writeFile(ctx, ToolSearchReplace, p, before, after)
	if note := matchNote(infos); note != "" && !r.isError {
		r.output = note + "\n" + r.output
	}
	return r
}

// matchNote mentions blocks that matched only loosely, so the model can
// check the diff.
func matchNote(infos []editformat.MatchInfo) string {
	var loose []string
	for _, m := range infos {
		if m.Strategy != "" && m.Strategy != editformat.StrategyExact && m.Strategy != editformat.StrategyWholeFile {
			loose = append(loose, fmt.Sprintf("block %d matched by %s at line %d", m.Block, m.Strategy, m.Line))
		}
	}
	if len(loose) == 0 {
		return ""
	}
	return "Note: " + strings.Join(loose, "; ") + " (not exactly): check the diff."
}

// openForWrite resolves a write tool's path and reads the file; a missing
// file is not an error. With fresh, an existing file must pass
// read-before-edit (checkFresh).
func (s *runState) openForWrite(ctx context.Context, raw string, fresh bool) (p string, data []byte, exists bool, fail *toolResult) {
	p, err := cleanPath(raw)
	if err != nil {
		r := errorResult("%v", err)
		return "", nil, false, &r
	}
	b, err := s.r.Env.ReadFile(ctx, p)
	switch {
	case err == nil:
		if fresh {
			if r := s.checkFresh(p, b); r != nil {
				return p, nil, false, r
			}
		}
		return p, b, true, nil
	case errors.Is(err, fs.ErrNotExist) && ctx.Err() == nil:
		return p, nil, false, nil
	}
	r := s.envFailure(ctx, "read "+p, err)
	return p, nil, false, &r
}

// writeFile writes after (nil before = a new file), records the version,
// marks the file seen, and reports a unified diff.
func (s *runState) writeFile(ctx context.Context, toolName, p string, before, after []byte) toolResult {
	if after == nil {
		after = []byte{}
	}
	diff, added, removed := editformat.UnifiedDiff(p, before, after)
	if r := s.approve(ctx, ApprovalRequest{Call: s.call, Paths: []string{p}, Diff: diff}); r != nil {
		return *r
	}
	if err := s.r.Env.WriteFile(ctx, p, after, 0); err != nil {
		return s.envFailure(ctx, "write "+p, err)
	}
	s.recordWrite(p, toolName, before, after)
	s.markSeen(p, after)
	verb := "Edited"
	if before == nil {
		verb = "Created"
	}
	out := fmt.Sprintf("%s %s: +%d -%d\n%s", verb, p, added, removed, diff)
	return toolResult{output: capOutput(strings.TrimRight(out, "\n"), s.a.cfg.MaxOutputChars, 0), changed: []string{p}}
}

// recordWrite appends one version to the file history.
func (s *runState) recordWrite(p, toolName string, before, after []byte) {
	s.history[p] = append(s.history[p], FileVersion{Turn: s.turn, Tool: toolName, Before: before, After: after})
}
