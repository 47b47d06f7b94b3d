package editformat

import (
	"fmt"
	"sort"
	"strings"
)

// Matching strategies reported in [MatchInfo].Strategy, in the order they are
// tried (see the package doc).
const (
	StrategyExact             = "exact"
	StrategyLeadingWhitespace = "leading_whitespace"
	StrategyLineTrimmed       = "line_trimmed"
	StrategyBlockAnchor       = "block_anchor"
	StrategyOutOfOrder        = "out_of_order"
	StrategyWholeFile         = "whole_file"
)

// MatchInfo says how one block was matched.
type MatchInfo struct {
	// Block is the 1-based block number.
	Block int
	// Strategy is one of the Strategy constants.
	Strategy string
	// Line is the 1-based line of the original where the match starts.
	Line int
}

// span is the part of the original one block replaces.
type span struct {
	start, end int
	repl       string
	block      int
}

// ApplySearchReplace applies every block of diff (see [ParseSearchReplace];
// file names in it are ignored) to original, in order, and returns the new
// content and how each block matched. Each SEARCH is looked for from the end
// of the previous in-order match, first occurrence wins: exact, then the
// fallbacks described in the package doc. An empty SEARCH replaces the whole
// file and must be the only block. Errors are [*SearchReplaceError]s of kind
// [KindMalformed] or [KindNoMatch]; on error nothing is returned.
//
// When every line break of original is CRLF, the blocks are matched without
// the CRs and the result keeps CRLF.
func ApplySearchReplace(original []byte, diff string) ([]byte, []MatchInfo, error) {
	orig := string(original)
	crlf := isCRLF(orig)
	if crlf || !strings.Contains(orig, "\r\n") {
		orig, diff = toLF(orig), toLF(diff)
	}
	blocks, err := parseSearchReplace(diff, false)
	if err != nil {
		return nil, nil, err
	}
	var out string
	var infos []MatchInfo
	if k := firstEmptySearch(blocks); k > 0 {
		if len(blocks) > 1 {
			return nil, nil, &SearchReplaceError{Kind: KindMalformed, Block: k, Line: blocks[k-1].line,
				Msg: "an empty SEARCH replaces the whole file, so it must be the only block; " +
					"give the exact lines to find instead"}
		}
		out, infos = blocks[0].Replace, []MatchInfo{{Block: 1, Strategy: StrategyWholeFile, Line: 1}}
	} else if out, infos, err = applyBlocks(orig, blocks); err != nil {
		return nil, nil, err
	}
	if crlf {
		out = toCRLF(out)
	}
	return []byte(out), infos, nil
}

func firstEmptySearch(blocks []srBlock) int {
	for i, b := range blocks {
		if b.Search == "" {
			return i + 1
		}
	}
	return 0
}

// applyBlocks matches every block against orig and splices in the
// replacements.
func applyBlocks(orig string, blocks []srBlock) (string, []MatchInfo, error) {
	ix := newLineIndex(orig)
	spans := make([]span, 0, len(blocks))
	infos := make([]MatchInfo, 0, len(blocks))
	from := 0
	for bi, b := range blocks {
		sp, strategy, ok := matchInOrder(orig, b.Search, b.Replace, from)
		if ok && overlapping(spans, sp) >= 0 {
			ok = false
		}
		if !ok {
			sp, ok = matchOutOfOrder(orig, b.Search, b.Replace, spans)
			strategy = StrategyOutOfOrder
		}
		if !ok {
			return "", nil, &SearchReplaceError{Kind: KindNoMatch, Block: bi + 1, Line: b.line,
				Msg: noMatchMessage(orig, b.Search, ix.line(from), spans)}
		}
		sp.block = bi + 1
		spans = append(spans, sp)
		infos = append(infos, MatchInfo{Block: bi + 1, Strategy: strategy, Line: ix.line(sp.start)})
		if strategy != StrategyOutOfOrder {
			from = sp.end
		}
	}
	sort.Slice(spans, func(a, b int) bool { return spans[a].start < spans[b].start })
	var res strings.Builder
	pos := 0
	for _, sp := range spans {
		res.WriteString(orig[pos:sp.start])
		res.WriteString(sp.repl)
		pos = sp.end
	}
	res.WriteString(orig[pos:])
	return res.String(), infos, nil
}

// overlapping returns the index of a span sp overlaps, or -1.
func overlapping(spans []span, sp span) int {
	for i, o := range spans {
		if sp.start < o.end && o.start < sp.end {
			return i
		}
	}
	return -1
}

// matchInOrder tries the in-order matchers, strictest first, from offset
// from.
func matchInOrder(orig, search, replace string, from int) (span, string, bool) {
	if i := strings.Index(orig[from:], search); i >= 0 {
		return span{start: from + i, end: from + i + len(search), repl: replace}, StrategyExact, true
	}
	if sp, ok := matchLeadingWhitespace(orig, search, replace, from); ok {
		return sp, StrategyLeadingWhitespace, true
	}
	// A spurious blank first SEARCH line (aider).
	if first, rest, ok := strings.Cut(search, "\n"); ok && strings.TrimSpace(first) == "" && strings.Count(rest, "\n") >= 2 {
		if i := strings.Index(orig[from:], rest); i >= 0 {
			return span{start: from + i, end: from + i + len(rest), repl: replace}, StrategyExact, true
		}
		if sp, ok := matchLeadingWhitespace(orig, rest, replace, from); ok {
			return sp, StrategyLeadingWhitespace, true
		}
	}
	if sp, ok := matchLines(orig, search, replace, from, false); ok {
		return sp, StrategyLineTrimmed, true
	}
	if sp, ok := matchLines(orig, search, replace, from, true); ok {
		return sp, StrategyBlockAnchor, true
	}
	return span{}, "", false
}

// matchOutOfOrder looks for search exactly anywhere, skipping occurrences
// that overlap a span already replaced.
func matchOutOfOrder(orig, search, replace string, spans []span) (span, bool) {
	for from := 0; from <= len(orig); {
		i := strings.Index(orig[from:], search)
		if i < 0 {
			break
		}
		sp := span{start: from + i, end: from + i + len(search), repl: replace}
		if overlapping(spans, sp) < 0 {
			return sp, true
		}
		from += i + 1
	}
	return span{}, false
}

// origLine is one line of the original: its text without "\n" and its byte
// range including the "\n" (if any).
type origLine struct {
	text       string
	start, end int
}

// origLines splits s into lines; a final "\n" does not start another line.
func origLines(s string) []origLine {
	var lines []origLine
	for start := 0; start < len(s); {
		end := strings.IndexByte(s[start:], '\n')
		if end < 0 {
			lines = append(lines, origLine{text: s[start:], start: start, end: len(s)})
			break
		}
		lines = append(lines, origLine{text: s[start : start+end], start: start, end: start + end + 1})
		start += end + 1
	}
	return lines
}

// firstLineFrom returns the first line starting at or after offset from.
func firstLineFrom(lines []origLine, from int) int {
	return sort.Search(len(lines), func(i int) bool { return lines[i].start >= from })
}

// matchLines is Cline's line-trimmed matcher (every line equal once trimmed)
// or, with anchors, its block-anchor matcher (3 lines or more whose first
// and last lines are equal once trimmed). The replacement is kept as is.
func matchLines(orig, search, replace string, from int, anchors bool) (span, bool) {
	want := splitLines(search)
	if len(want) == 0 || anchors && len(want) < 3 {
		return span{}, false
	}
	first, last := strings.TrimSpace(want[0]), strings.TrimSpace(want[len(want)-1])
	if anchors && (first == "" || last == "") {
		return span{}, false
	}
	lines := origLines(orig)
	for i := firstLineFrom(lines, from); i+len(want) <= len(lines); i++ {
		ok := true
		if anchors {
			ok = strings.TrimSpace(lines[i].text) == first && strings.TrimSpace(lines[i+len(want)-1].text) == last
		} else {
			for j, w := range want {
				if strings.TrimSpace(lines[i+j].text) != strings.TrimSpace(w) {
					ok = false
					break
				}
			}
		}
		if ok {
			return span{start: lines[i].start, end: lines[i+len(want)-1].end, repl: replace}, true
		}
	}
	return span{}, false
}

// noMatchMessage explains a SEARCH text that matched nowhere.
func noMatchMessage(orig, search string, fromLine int, spans []span) string {
	for from := 0; from <= len(orig); {
		i := strings.Index(orig[from:], search)
		if i < 0 {
			break
		}
		if k := overlapping(spans, span{start: from + i, end: from + i + len(search)}); k >= 0 {
			return fmt.Sprintf("the SEARCH text only matches text that block %d already replaces; "+
				"merge the two blocks into one", spans[k].block)
		}
		from += i + 1
	}
	var b strings.Builder
	b.WriteString("the SEARCH text does not match the file")
	if fromLine > 1 {
		fmt.Fprintf(&b, " (searched from line %d, where the previous block ended, then from the start)", fromLine)
	}
	b.WriteString(":\n")
	b.WriteString(quoteLines(splitLines(search)))
	b.WriteString(firstLineHint(splitLines(orig), splitLines(search)))
	return b.String()
}
