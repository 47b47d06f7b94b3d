package agent

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/wrenchworks/wrench/sandbox"
)

// cleanPath turns a tool's path argument into a clean workspace-relative
// path ("." for the root), refusing anything outside the workspace.
func cleanPath(p string) (string, error) {
	p = strings.TrimSpace(p)
	c, err := sandbox.Rel(sandbox.WorkDir, p)
	if errors.Is(err, sandbox.ErrEscape) {
		return "", fmt.Errorf("path %q is outside the workspace %s", p, sandbox.WorkDir)
	}
	return c, err
}

// truncateMiddle keeps the head and tail of s within max bytes (cut on rune
// boundaries) and reports how many bytes it dropped from the middle.
func truncateMiddle(s string, max int) (head, tail string, dropped int) {
	if max <= 0 || len(s) <= max {
		return s, "", 0
	}
	h := max / 2
	for h > 0 && !utf8.RuneStart(s[h]) {
		h--
	}
	t := len(s) - (max - max/2)
	for t < len(s) && !utf8.RuneStart(s[t]) {
		t++
	}
	return s[:h], s[t:], t - h
}

// capOutput truncates a tool output for the model, with a notice in the
// middle saying how much was cut and how to narrow the command. extra is
// what the environment already dropped.
func capOutput(s string, max int, extra int64) string {
	head, tail, dropped := truncateMiddle(s, max)
	total := int64(dropped) + extra
	if total == 0 {
		return s
	}
	notice := fmt.Sprintf("\n\n[... %d characters omitted from the middle of this output. It was too long: narrow the command (grep for what you need, pipe through head or tail, use sed -n 'A,Bp', or pick a more specific path) ...]\n\n", total)
	if dropped == 0 {
		// The environment cut it already; mark where.
		return s + notice
	}
	return head + notice + tail
}

// cutHead keeps the first max bytes of s, cut at a line end when there is
// one in the second half, else at a rune boundary.
func cutHead(s string, max int) string {
	if len(s) <= max {
		return s
	}
	h := max
	for h > 0 && !utf8.RuneStart(s[h]) {
		h--
	}
	if i := strings.LastIndexByte(s[:h], '\n'); i > max/2 {
		return s[:i]
	}
	return s[:h]
}
