package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"strings"

	"github.com/wrenchworks/wrench/agent/editformat"
	"github.com/wrenchworks/wrench/diff"
	"github.com/wrenchworks/wrench/sandbox"
)

var editTool = &toolDef{
	name: ToolEdit,
	desc: "Edit one file. Replace: old_string must occur exactly once in the file (include enough surrounding lines to make it unique) and is replaced by new_string. Create: empty old_string and the full content as new_string; the file must not exist. Delete text: empty new_string. The file must have been viewed and not changed since. Returns a unified diff.",
	params: `{"type":"object","properties":{` +
		`"path":{"type":"string","description":"file path, relative to the workspace"},` +
		`"old_string":{"type":"string","description":"exact text to replace, including whitespace; empty to create a file"},` +
		`"new_string":{"type":"string","description":"replacement text; empty to delete old_string"}},` +
		`"required":["path","old_string","new_string"]}`,
	required: []string{"path", "old_string", "new_string"},
	bind:     func(k *toolKit) tool { return &edit{newFileWriter(k)} },
}

// edit replaces one exact string in a file, or creates a file.
type edit struct{ w *fileWriter }

func (t *edit) run(ctx context.Context, call ToolCall, raw json.RawMessage) toolResult {
	a, bad := args[struct {
		Path string `json:"path"`
		Old  string `json:"old_string"`
		New  string `json:"new_string"`
	}](ToolEdit, raw)
	if bad != nil {
		return *bad
	}
	p, before, exists, fail := t.w.open(ctx, a.Path, false)
	if fail != nil {
		return *fail
	}
	if a.Old == "" {
		if exists {
			return errorResult("%s already exists. To change it, view it and give the text to replace as old_string; to overwrite it whole, use write.", p)
		}
		return t.w.write(ctx, call, p, nil, []byte(a.New))
	}
	if !exists {
		return errorResult("%s does not exist. To create it, call edit with an empty old_string and the content as new_string.", p)
	}
	if r := t.w.seen.check(p, before); r != nil {
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
	return t.w.write(ctx, call, p, before, after)
}

var writeTool = &toolDef{
	name: ToolWrite,
	desc: "Write a whole file, creating it (and its directories) or replacing its content. An existing file must have been viewed and not changed since. Returns a unified diff; nothing is written when the content is unchanged.",
	params: `{"type":"object","properties":{` +
		`"path":{"type":"string","description":"file path, relative to the workspace"},` +
		`"content":{"type":"string","description":"the complete new content"}},` +
		`"required":["path","content"]}`,
	required: []string{"path", "content"},
	bind:     func(k *toolKit) tool { return &write{newFileWriter(k)} },
}

// write replaces a whole file, or creates one.
type write struct{ w *fileWriter }

func (t *write) run(ctx context.Context, call ToolCall, raw json.RawMessage) toolResult {
	a, bad := args[struct {
		Path    string `json:"path"`
		Content string `json:"content"`
	}](ToolWrite, raw)
	if bad != nil {
		return *bad
	}
	p, before, exists, fail := t.w.open(ctx, a.Path, true)
	if fail != nil {
		return *fail
	}
	if exists && bytes.Equal(before, []byte(a.Content)) {
		return toolResult{output: fmt.Sprintf("No change: %s already has this content.", p)}
	}
	return t.w.write(ctx, call, p, before, []byte(a.Content))
}

var searchReplaceTool = &toolDef{
	name: ToolSearchReplace,
	desc: "Edit one file with one or more SEARCH/REPLACE blocks, applied in order:\n------- SEARCH\n[exact lines to find]\n=======\n[replacement lines]\n+++++++ REPLACE\nSEARCH must copy the file's lines exactly (whitespace included) with enough context to be unique. An empty SEARCH replaces the whole file (or creates it); an empty REPLACE deletes. An existing file must have been viewed and not changed since. Returns a unified diff.",
	params: `{"type":"object","properties":{` +
		`"path":{"type":"string","description":"file path, relative to the workspace"},` +
		`"diff":{"type":"string","description":"one or more SEARCH/REPLACE blocks"}},` +
		`"required":["path","diff"]}`,
	required: []string{"path", "diff"},
	bind:     func(k *toolKit) tool { return &searchReplace{newFileWriter(k)} },
}

// searchReplace applies SEARCH/REPLACE blocks to one file.
type searchReplace struct{ w *fileWriter }

func (t *searchReplace) run(ctx context.Context, call ToolCall, raw json.RawMessage) toolResult {
	a, bad := args[struct {
		Path string `json:"path"`
		Diff string `json:"diff"`
	}](ToolSearchReplace, raw)
	if bad != nil {
		return *bad
	}
	p, before, exists, fail := t.w.open(ctx, a.Path, true)
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
	r := t.w.write(ctx, call, p, before, after)
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

// fileWriter is what the write tools share: the files, the read tracker
// (read-before-edit), the approver and the output cap.
type fileWriter struct {
	files     sandbox.Files
	seen      *readTracker
	approve   approveFunc // nil: nobody asked
	maxOutput int
}

func newFileWriter(k *toolKit) *fileWriter {
	return &fileWriter{files: k.env, seen: k.seen, approve: k.approve, maxOutput: k.cfg.MaxOutputChars}
}

// open resolves a write tool's path and reads the file; a missing file is
// not an error. With fresh, an existing file must pass read-before-edit.
func (w *fileWriter) open(ctx context.Context, raw string, fresh bool) (p string, data []byte, exists bool, fail *toolResult) {
	p, err := cleanPath(raw)
	if err != nil {
		r := errorResult("%v", err)
		return "", nil, false, &r
	}
	b, err := w.files.ReadFile(ctx, p)
	switch {
	case err == nil:
		if fresh {
			if r := w.seen.check(p, b); r != nil {
				return p, nil, false, r
			}
		}
		return p, b, true, nil
	case errors.Is(err, fs.ErrNotExist) && ctx.Err() == nil:
		return p, nil, false, nil
	}
	r := envFailure(ctx, "read "+p, err)
	return p, nil, false, &r
}

// write writes after (nil before: a new file) once approved, marks the
// file seen, and reports a unified diff and the write.
func (w *fileWriter) write(ctx context.Context, call ToolCall, p string, before, after []byte) toolResult {
	if after == nil {
		after = []byte{}
	}
	text, added, removed := diff.Unified(p, before, after)
	if w.approve != nil {
		if r := w.approve(ctx, ApprovalRequest{Call: call, Paths: []string{p}, Diff: text}); r != nil {
			return *r
		}
	}
	if err := w.files.WriteFile(ctx, p, after, 0); err != nil {
		return envFailure(ctx, "write "+p, err)
	}
	w.seen.saw(p, after)
	verb := "Edited"
	if before == nil {
		verb = "Created"
	}
	out := fmt.Sprintf("%s %s: +%d -%d\n%s", verb, p, added, removed, text)
	return toolResult{
		output: capOutput(strings.TrimRight(out, "\n"), w.maxOutput, 0),
		writes: []fileWrite{{path: p, before: before, after: after}},
	}
}
