package editformat

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

// sr builds a Cline-style diff from search/replace pairs.
func sr(pairs ...string) string {
	var b strings.Builder
	for i := 0; i < len(pairs); i += 2 {
		b.WriteString("------- SEARCH\n" + pairs[i] + "=======\n" + pairs[i+1] + "+++++++ REPLACE\n")
	}
	return b.String()
}

func TestApplySearchReplace(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		original string
		diff     string
		want     string
		infos    []MatchInfo
	}{
		{
			name: "exact", original: "a\nb\nc\n", diff: sr("b\n", "B\n"),
			want: "a\nB\nc\n", infos: []MatchInfo{{1, StrategyExact, 2}},
		},
		{
			name: "repeated text: each block takes the next occurrence", original: "x\ny\nx\n",
			diff: sr("x\n", "1\n", "x\n", "2\n"),
			want: "1\ny\n2\n", infos: []MatchInfo{{1, StrategyExact, 1}, {2, StrategyExact, 3}},
		},
		{
			name: "leading whitespace re-indents the replacement", original: "func f() {\n\tif x {\n\t\treturn\n\t}\n}\n",
			diff: sr("if x {\n\treturn\n}\n", "if y {\n\tpanic(1)\n}\n"),
			want: "func f() {\n\tif y {\n\t\tpanic(1)\n\t}\n}\n", infos: []MatchInfo{{1, StrategyLeadingWhitespace, 2}},
		},
		{
			name:     "unindented SEARCH, REPLACE with the file's indentation: kept as written",
			original: "func f() {\n\tif x {\n\t\treturn\n\t}\n}\n",
			diff:     sr("if x {\n\treturn\n}\n", "\tif y {\n\t\tpanic(1)\n\t}\n"),
			want:     "func f() {\n\tif y {\n\t\tpanic(1)\n\t}\n}\n", infos: []MatchInfo{{1, StrategyLeadingWhitespace, 2}},
		},
		{
			name:     "unindented SEARCH, REPLACE with the file's space indentation: not indented twice",
			original: "class A:\n    def f(self):\n        x = 1\n        return x\n",
			diff:     sr("x = 1\nreturn x\n", "        x = 2\n        return x\n"),
			want:     "class A:\n    def f(self):\n        x = 2\n        return x\n", infos: []MatchInfo{{1, StrategyLeadingWhitespace, 3}},
		},
		{
			name:     "REPLACE indented like SEARCH is re-indented",
			original: "class A:\n    def f(self):\n        x = 1\n        return x\n",
			diff:     sr("x = 1\nreturn x\n", "x = 2\nif x:\n    return x\n"),
			want:     "class A:\n    def f(self):\n        x = 2\n        if x:\n            return x\n", infos: []MatchInfo{{1, StrategyLeadingWhitespace, 3}},
		},
		{
			name: "line trimmed keeps the replacement as written", original: "a\n  b  \nc\n", diff: sr("b\n", "B\n"),
			want: "a\nB\nc\n", infos: []MatchInfo{{1, StrategyLineTrimmed, 2}},
		},
		{
			name: "block anchor", original: "x\nfunc f() {\n\told()\n}\n", diff: sr("func f() {\n\tsomething else\n}\n", "func f() {}\n"),
			want: "x\nfunc f() {}\n", infos: []MatchInfo{{1, StrategyBlockAnchor, 2}},
		},
		{
			name: "out of order", original: "a\nb\nc\n", diff: sr("c\n", "C\n", "a\n", "A\n"),
			want: "A\nb\nC\n", infos: []MatchInfo{{1, StrategyExact, 3}, {2, StrategyOutOfOrder, 1}},
		},
		{
			name: "whole file", original: "old\ncontent\n", diff: sr("", "new\n"),
			want: "new\n", infos: []MatchInfo{{1, StrategyWholeFile, 1}},
		},
		{
			name: "whole file emptied", original: "old\n", diff: sr("", ""),
			want: "", infos: []MatchInfo{{1, StrategyWholeFile, 1}},
		},
		{
			name: "legacy markers", original: "a\nb\n", diff: "<<<<<<< SEARCH\nb\n=======\nB\n>>>>>>> REPLACE\n",
			want: "a\nB\n", infos: []MatchInfo{{1, StrategyExact, 2}},
		},
		{
			name: "CRLF file stays CRLF", original: "a\r\nb\r\n", diff: sr("b\n", "B\nC\n"),
			want: "a\r\nB\r\nC\r\n", infos: []MatchInfo{{1, StrategyExact, 2}},
		},
		{
			name: "CRLF diff on an LF file", original: "a\nb\n", diff: strings.ReplaceAll(sr("b\n", "B\n"), "\n", "\r\n"),
			want: "a\nB\n", infos: []MatchInfo{{1, StrategyExact, 2}},
		},
		{
			name: "cut-off REPLACE marker at the end", original: "a\nb\n", diff: "------- SEARCH\nb\n=======\nB\n+++++++ REPL",
			want: "a\nB\n", infos: []MatchInfo{{1, StrategyExact, 2}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, infos, err := ApplySearchReplace([]byte(tt.original), tt.diff)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
			if !reflect.DeepEqual(infos, tt.infos) {
				t.Errorf("infos %+v, want %+v", infos, tt.infos)
			}
		})
	}
}

func TestApplySearchReplaceErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		original string
		diff     string
		kind     string
		block    int
		line     int
		msg      string
	}{
		{name: "no match", original: "a\n", diff: sr("zzz\n", "y\n"), kind: KindNoMatch, block: 1, line: 1, msg: "does not match the file"},
		{
			name: "second block matches only replaced text", original: "a\nb\n", diff: sr("a\n", "A\n", "a\n", "B\n"),
			kind: KindNoMatch, block: 2, line: 6, msg: "only matches text that block 1 already replaces",
		},
		{name: "no blocks", original: "a\n", diff: "just prose\n", kind: KindMalformed, msg: "no SEARCH/REPLACE block found"},
		{name: "orphan separator", original: "a\n", diff: "a\n=======\nb\n", kind: KindMalformed, block: 1, line: 2, msg: "no SEARCH marker before it"},
		{name: "orphan REPLACE", original: "a\n", diff: "+++++++ REPLACE\n", kind: KindMalformed, block: 1, line: 1, msg: "no SEARCH block before it"},
		{
			name: "REPLACE before separator", original: "a\n", diff: "------- SEARCH\na\n+++++++ REPLACE\n",
			kind: KindMalformed, block: 1, line: 3, msg: "before the ======= line",
		},
		{
			name: "SEARCH inside SEARCH", original: "a\n", diff: "------- SEARCH\na\n------- SEARCH\n",
			kind: KindMalformed, block: 1, line: 3, msg: "inside the SEARCH section",
		},
		{
			name: "SEARCH before REPLACE marker", original: "a\n", diff: "------- SEARCH\na\n=======\nb\n------- SEARCH\n",
			kind: KindMalformed, block: 1, line: 5, msg: "was closed",
		},
		{
			name: "second separator in a Cline block", original: "a\n", diff: "------- SEARCH\na\n=======\nb\n=======\n",
			kind: KindMalformed, block: 1, line: 5, msg: "second =======",
		},
		{
			name: "ends inside SEARCH", original: "a\n", diff: "------- SEARCH\na\n",
			kind: KindMalformed, block: 1, line: 1, msg: "ends inside its SEARCH section",
		},
		{
			name: "unclosed legacy block", original: "a\n", diff: "<<<<<<< SEARCH\na\n=======\nb\n",
			kind: KindMalformed, block: 1, line: 1, msg: "Expected `>>>>>>> REPLACE` or `=======`",
		},
		{
			name: "empty SEARCH among others", original: "a\n", diff: sr("a\n", "b\n", "", "c\n"),
			kind: KindMalformed, block: 2, line: 6, msg: "must be the only block",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, infos, err := ApplySearchReplace([]byte(tt.original), tt.diff)
			if got != nil || infos != nil {
				t.Errorf("result %q %+v returned with error %v", got, infos, err)
			}
			var se *SearchReplaceError
			if !errors.As(err, &se) {
				t.Fatalf("error %v, want *SearchReplaceError", err)
			}
			if se.Kind != tt.kind || se.Block != tt.block || se.Line != tt.line || !strings.Contains(se.Msg, tt.msg) {
				t.Errorf("error %v (kind %s block %d line %d), want kind %s block %d line %d with %q",
					err, se.Kind, se.Block, se.Line, tt.kind, tt.block, tt.line, tt.msg)
			}
		})
	}
}

func TestParseSearchReplace(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		diff string
		want []Block
	}{
		{
			name: "bare Cline blocks have no path",
			diff: sr("a\n", "b\n", "c\n", ""),
			want: []Block{{Search: "a\n", Replace: "b\n"}, {Search: "c\n", Replace: ""}},
		},
		{
			name: "path before a Cline block must look like a path",
			diff: "src/main.go\n" + sr("a\n", "b\n") + "Then:\n" + sr("c\n", "d\n"),
			want: []Block{{Path: "src/main.go", Search: "a\n", Replace: "b\n"}, {Path: "src/main.go", Search: "c\n", Replace: "d\n"}},
		},
		{
			name: "legacy block at the start needs no filename",
			diff: "<<<<<<< SEARCH\na\n=======\nb\n>>>>>>> REPLACE",
			want: []Block{{Search: "a\n", Replace: "b\n"}},
		},
		{
			name: "aider filename decorations",
			diff: "Edit this:\n\n**`pkg/x.go`**:\n```go\n<<<<<<< SEARCH\na\n=======\nb\n>>>>>>> REPLACE\n```\n",
			want: []Block{{Path: "pkg/x.go", Search: "a\n", Replace: "b\n"}},
		},
		{
			name: "marker variants",
			diff: "  <<<<<<< SEARCH>\na\n  =======  \nb\n>>>>>>> REPLACE  \n--- SEARCH\nc\n===\nd\n+++ REPLACE>\n",
			want: []Block{{Search: "a\n", Replace: "b\n"}, {Search: "c\n", Replace: "d\n"}},
		},
		{
			name: "a second separator ends a legacy block",
			diff: "<<<<<<< SEARCH\na\n=======\nb\n=======\n",
			want: []Block{{Search: "a\n", Replace: "b\n"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := ParseSearchReplace(tt.diff)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("blocks\n%+v\nwant\n%+v", got, tt.want)
			}
		})
	}
}

func TestParseSearchReplaceNeedsFilenameInReply(t *testing.T) {
	t.Parallel()
	diff := "Here you go:\n```\n<<<<<<< SEARCH\na\n=======\nb\n>>>>>>> REPLACE\n```\n"
	_, err := ParseSearchReplace(diff)
	var se *SearchReplaceError
	if !errors.As(err, &se) || se.Kind != KindMalformed || !strings.Contains(se.Msg, "filename") {
		t.Fatalf("error %v, want a malformed error about the filename", err)
	}
	// The tool names the file, so applying does not ask for one.
	got, _, err := ApplySearchReplace([]byte("a\n"), diff)
	if err != nil || string(got) != "b\n" {
		t.Fatalf("ApplySearchReplace = %q, %v", got, err)
	}
}
