package editformat

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/wrenchworks/wrench/sandbox"
)

// ErrIsDir is what a [FileReader] returns (possibly wrapped) for a path that
// is a directory: the sandbox vocabulary's sentinel, which every sandbox.Env
// reports. ApplyPatch refuses to update or delete a directory and treats
// one as an existing path for Add File and Move to.
var ErrIsDir = sandbox.ErrIsDir

// ErrEmptyOld is returned by [Replace] when old is empty: creating a file is
// the edit tool's business, not a replacement.
var ErrEmptyOld = errors.New("old_string is empty")

// ErrNoMatch is wrapped by [ApplyPatch] errors when a chunk's lines (or its
// @@ header) are not found in the file.
var ErrNoMatch = errors.New("lines not found in the file")

// ErrTooFuzzy is wrapped by [ApplyPatch] errors when a chunk matched only at
// a fuzz level above [PatchOptions].MaxFuzz.
var ErrTooFuzzy = errors.New("context matched only loosely")

// maxReportedLines caps MatchError.Lines.
const maxReportedLines = 10

// MatchError is returned by [Replace] when old does not occur exactly once.
type MatchError struct {
	// Count is how many times old occurs: 0, or 2 and more.
	Count int
	// Lines holds the 1-based start line of each match, at most 10. When
	// Count is 0 it may hold the line of a whitespace-insensitive match.
	Lines []int
	// Hint tells the model how to fix its call.
	Hint string
}

// Error says what went wrong and how to fix it, e.g. "old_string matches 3
// times (lines 4, 17, 30); add surrounding lines to make it unique".
func (e *MatchError) Error() string {
	if e.Count == 0 {
		return "old_string not found; " + e.Hint
	}
	lines := joinInts(e.Lines)
	if e.Count > len(e.Lines) {
		lines += ", ..."
	}
	return fmt.Sprintf("old_string matches %d times (%s %s); %s",
		e.Count, plural(len(e.Lines), "line", "lines"), lines, e.Hint)
}

// PatchError reports malformed apply_patch text.
type PatchError struct {
	// Line is the 1-based line of the patch text at fault; 0 when the fault
	// is not on one line.
	Line int
	// Msg describes the fault.
	Msg string
}

// Error reads "invalid patch: line 3: ...".
func (e *PatchError) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("invalid patch: line %d: %s", e.Line, e.Msg)
	}
	return "invalid patch: " + e.Msg
}

// OpError reports a patch operation that cannot be applied. When ApplyPatch
// returns one, no change at all was computed.
type OpError struct {
	// Op is the 1-based position of the operation in the patch.
	Op int
	// Kind and Path are the operation's; MoveTo is its destination, if any.
	Kind   OpKind
	Path   string
	MoveTo string
	// Err wraps fs.ErrNotExist, fs.ErrExist, [ErrIsDir], [ErrNoMatch] or
	// [ErrTooFuzzy], or an error of the [FileReader].
	Err error
}

// Error names the operation and its path, e.g. "patch operation 2 (update
// missing.txt): file does not exist".
func (e *OpError) Error() string {
	target := e.Path
	if e.MoveTo != "" {
		target += " -> " + e.MoveTo
	}
	return fmt.Sprintf("patch operation %d (%s %s): %v", e.Op, e.Kind, target, e.Err)
}

// Unwrap returns Err.
func (e *OpError) Unwrap() error { return e.Err }

// SearchReplaceError kinds, matching conformance/search-replace.json.
const (
	// KindNoMatch: a SEARCH text is not in the file.
	KindNoMatch = "no_match"
	// KindAmbiguous is never returned by ApplySearchReplace, which takes the
	// first occurrence (see the package doc); it is listed for callers that
	// switch on every kind the conformance data names.
	KindAmbiguous = "ambiguous"
	// KindMalformed: the markers do not form valid blocks.
	KindMalformed = "malformed"
)

// SearchReplaceError is returned by [ParseSearchReplace] and
// [ApplySearchReplace].
type SearchReplaceError struct {
	// Kind is KindNoMatch or KindMalformed.
	Kind string
	// Block is the 1-based block at fault; 0 when no block is involved.
	Block int
	// Line is the 1-based line of the diff text at fault, when known.
	Line int
	// Msg describes the fault and how to fix it.
	Msg string
}

// Error reads e.g. "search/replace block 2 (line 9): SEARCH text not found".
func (e *SearchReplaceError) Error() string {
	var b strings.Builder
	b.WriteString("search/replace")
	if e.Block > 0 {
		fmt.Fprintf(&b, " block %d", e.Block)
	}
	if e.Line > 0 {
		fmt.Fprintf(&b, " (line %d)", e.Line)
	}
	b.WriteString(": ")
	b.WriteString(e.Msg)
	return b.String()
}

func joinInts(xs []int) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = strconv.Itoa(x)
	}
	return strings.Join(s, ", ")
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
