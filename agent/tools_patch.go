package agent

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"strings"

	"github.com/wrenchworks/wrench/agent/editformat"
	"github.com/wrenchworks/wrench/diff"
)

// maxPatchFuzz is the loosest context match a patch may use: whitespace
// differences pass, typographic punctuation does not.
const maxPatchFuzz = editformat.FuzzWhitespace

var patchTool = &toolDef{
	name: ToolPatch,
	desc: "Apply a multi-file patch in the apply_patch format: *** Begin Patch, then *** Add File: path (lines prefixed +), *** Update File: path (optional *** Move to: path, then @@ chunks of ' ' context, '-' removed and '+' added lines), *** Delete File: path, and *** End Patch. Files updated or deleted must have been viewed and not changed since; added files must not exist. All or nothing. Returns unified diffs.",
	params: `{"type":"object","properties":{` +
		`"patch_text":{"type":"string","description":"the whole patch, from *** Begin Patch to *** End Patch"}},` +
		`"required":["patch_text"]}`,
	required: []string{"patch_text"},
	bind:     func(k *toolKit) tool { return &patch{newFileWriter(k)} },
}

// patch applies a multi-file patch, all or nothing.
type patch struct{ w *fileWriter }

func (t *patch) run(ctx context.Context, call ToolCall, raw json.RawMessage) toolResult {
	a, bad := args[struct {
		Text string `json:"patch_text"`
	}](ToolPatch, raw)
	if bad != nil {
		return *bad
	}
	changes, fail := t.compute(ctx, a.Text)
	if fail != nil {
		return *fail
	}
	if r := t.checkRead(changes); r != nil {
		return *r
	}
	if t.w.approve != nil {
		if r := t.w.approve(ctx, patchApproval(call, changes)); r != nil {
			return *r
		}
	}
	return t.apply(ctx, changes)
}

// pathedChange is a change with its clean source and destination paths
// (equal unless the change is a move).
type pathedChange struct {
	editformat.Change
	src, dst string
}

// compute works out the patch's changes against the files as they are,
// writing nothing.
func (t *patch) compute(ctx context.Context, text string) ([]pathedChange, *toolResult) {
	var fatal error
	read := func(name string) ([]byte, error) {
		b, err := t.read(ctx, name)
		if err != nil && (ctx.Err() != nil || envFailed(err)) {
			fatal = err
		}
		return b, err
	}
	changes, err := editformat.ApplyPatch(text, read, editformat.PatchOptions{MaxFuzz: maxPatchFuzz})
	switch {
	case fatal != nil:
		r := envFailure(ctx, "patch", fatal)
		return nil, &r
	case err != nil:
		r := errorResult("%v. Nothing was changed.", err)
		return nil, &r
	case len(changes) == 0:
		r := errorResult("the patch changes nothing.")
		return nil, &r
	}
	out := make([]pathedChange, len(changes))
	for i, c := range changes {
		dst, err := cleanPath(c.Path)
		src := dst
		if err == nil && c.From != "" {
			src, err = cleanPath(c.From)
		}
		if err != nil {
			r := errorResult("%v", err)
			return nil, &r
		}
		out[i] = pathedChange{Change: c, src: src, dst: dst}
	}
	return out, nil
}

// read gives the patch a file's content, telling a directory apart from a
// missing file.
func (t *patch) read(ctx context.Context, name string) ([]byte, error) {
	p, err := cleanPath(name)
	if err != nil {
		return nil, err
	}
	b, err := t.w.files.ReadFile(ctx, p)
	if err == nil || ctx.Err() != nil || envFailed(err) || errors.Is(err, fs.ErrNotExist) {
		return b, err
	}
	if fi, serr := t.w.files.Stat(ctx, p); serr == nil && fi.IsDir {
		return nil, fmt.Errorf("%s: %w", p, editformat.ErrIsDir)
	}
	return nil, err
}

// checkRead applies read-before-edit to every existing file the patch
// touches (its first change holds the content on disk).
func (t *patch) checkRead(changes []pathedChange) *toolResult {
	checked := map[string]bool{}
	for _, c := range changes {
		if checked[c.src] {
			continue
		}
		checked[c.src] = true
		if c.Before == nil {
			continue
		}
		if r := t.w.seen.check(c.src, c.Before); r != nil {
			r.output += " Nothing was changed."
			return r
		}
	}
	return nil
}

// patchApproval is the request a person sees: every path and one diff.
func patchApproval(call ToolCall, changes []pathedChange) ApprovalRequest {
	req := ApprovalRequest{Call: call}
	var all strings.Builder
	for _, c := range changes {
		d, _, _ := diff.Unified(cmp.Or(c.Path, c.From), c.Before, c.After)
		req.Paths = append(req.Paths, changeName(cmp.Or(c.From, c.Path), c.Path))
		all.WriteString(d)
	}
	req.Diff = all.String()
	return req
}

// apply writes every change; when one fails, those already written are
// put back and nothing else is recorded.
func (t *patch) apply(ctx context.Context, changes []pathedChange) toolResult {
	for i, c := range changes {
		if err := t.applyOne(ctx, c); err != nil {
			t.undo(ctx, changes[:i])
			return envFailure(ctx, "patch "+c.dst, err)
		}
	}
	var out strings.Builder
	var writes []fileWrite
	for _, c := range changes {
		moved := c.src != c.dst
		if moved {
			writes = append(writes, fileWrite{path: c.dst, after: c.After}, fileWrite{path: c.src, before: c.Before})
			t.w.seen.forget(c.src)
		} else {
			writes = append(writes, fileWrite{path: c.dst, before: c.Before, after: c.After})
		}
		if c.After != nil {
			t.w.seen.saw(c.dst, c.After)
		} else {
			t.w.seen.forget(c.dst)
		}
		describeChange(&out, c)
	}
	return toolResult{output: capOutput(strings.TrimRight(out.String(), "\n"), t.w.maxOutput, 0), writes: writes}
}

// applyOne writes (or, with nil After, deletes) the destination and
// removes the source of a move.
func (t *patch) applyOne(ctx context.Context, c pathedChange) error {
	if c.After == nil {
		return t.w.files.Remove(ctx, c.dst)
	}
	if err := t.w.files.WriteFile(ctx, c.dst, c.After, 0); err != nil {
		return err
	}
	if c.src != c.dst {
		return t.w.files.Remove(ctx, c.src)
	}
	return nil
}

// undo puts back what a failed patch already wrote, best effort.
func (t *patch) undo(ctx context.Context, done []pathedChange) {
	for i := len(done) - 1; i >= 0; i-- {
		c := done[i]
		if c.Before != nil {
			_ = t.w.files.WriteFile(ctx, c.src, c.Before, 0)
		}
		if c.Before == nil || c.src != c.dst {
			_ = t.w.files.Remove(ctx, c.dst)
		}
	}
}

// describeChange reports one applied change: what happened, the line
// counts and its diff.
func describeChange(out *strings.Builder, c pathedChange) {
	moved := c.src != c.dst
	text, added, removed := diff.Unified(c.dst, c.Before, c.After)
	fmt.Fprintf(out, "%s %s: +%d -%d", changeVerb(c.Before, c.After, moved), changeName(c.src, c.dst), added, removed)
	if c.Fuzz > editformat.FuzzExact {
		out.WriteString(" (context matched ignoring whitespace)")
	}
	out.WriteString("\n")
	out.WriteString(text)
	if !strings.HasSuffix(text, "\n") {
		out.WriteString("\n")
	}
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
