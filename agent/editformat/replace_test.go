package editformat

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

func TestReplace(t *testing.T) {
	t.Parallel()
	// 30 lines with "dup" on lines 4, 17 and 30.
	var many []string
	for i := 1; i <= 30; i++ {
		l := "line"
		if i == 4 || i == 17 || i == 30 {
			l = "dup"
		}
		many = append(many, l)
	}
	manyText := strings.Join(many, "\n") + "\n"

	tests := []struct {
		name      string
		content   string
		old, new  string
		want      string
		wantCount int   // for a *MatchError
		wantLines []int // for a *MatchError
		wantMsg   string
	}{
		{name: "one match", content: "a\nb\nc\n", old: "b\n", new: "B\nB2\n", want: "a\nB\nB2\nc\n"},
		{name: "delete", content: "a\nb\nc\n", old: "b\n", new: "", want: "a\nc\n"},
		{name: "mid-line", content: "x := f(a, b)\n", old: "f(a, b)", new: "g(a)", want: "x := g(a)\n"},
		{name: "unicode", content: "naïve café\n", old: "café", new: "café ☕", want: "naïve café ☕\n"},
		{
			name: "three matches", content: manyText, old: "dup\n", new: "x\n",
			wantCount: 3, wantLines: []int{4, 17, 30},
			wantMsg: "old_string matches 3 times (lines 4, 17, 30); add surrounding lines to old_string to make it unique",
		},
		{
			name: "overlapping matches count", content: "aaa\n", old: "aa", new: "b",
			wantCount: 2, wantLines: []int{1, 1},
		},
		{
			name: "not found", content: "a\nb\n", old: "zzz", new: "y",
			wantMsg: "old_string not found; view the file again and copy the text to replace exactly, including whitespace",
		},
		{
			name: "whitespace-insensitive match", content: "func f() {\n\treturn 1\n}\n", old: "func f() {\n    return 1\n}", new: "",
			wantLines: []int{1},
			wantMsg:   "old_string not found; it matches at line 1 if whitespace is ignored: copy the exact indentation, spacing and line breaks from the file",
		},
		{
			name: "first line only", content: "a\nb\nc\n", old: "b\nX\n", new: "",
			wantLines: []int{2},
			wantMsg:   "old_string not found; its first line occurs at line 2 but what follows differs: view the file again and copy the text exactly",
		},
		{name: "CRLF file, LF old_string", content: "a\r\nb\r\nc\r\n", old: "a\nb\n", new: "x\ny\n", want: "x\r\ny\r\nc\r\n"},
		{name: "CRLF file, CRLF old_string", content: "a\r\nb\r\n", old: "b\r\n", new: "c\r\n", want: "a\r\nc\r\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := Replace([]byte(tt.content), tt.old, tt.new)
			if tt.wantLines == nil && tt.wantMsg == "" {
				if err != nil {
					t.Fatal(err)
				}
				if string(got) != tt.want {
					t.Errorf("got %q, want %q", got, tt.want)
				}
				return
			}
			var me *MatchError
			if !errors.As(err, &me) {
				t.Fatalf("error %v, want *MatchError", err)
			}
			if got != nil {
				t.Errorf("content %q returned with an error", got)
			}
			if me.Count != tt.wantCount || !slices.Equal(me.Lines, tt.wantLines) {
				t.Errorf("Count %d Lines %v, want %d %v", me.Count, me.Lines, tt.wantCount, tt.wantLines)
			}
			if tt.wantMsg != "" && err.Error() != tt.wantMsg {
				t.Errorf("message\n%q\nwant\n%q", err.Error(), tt.wantMsg)
			}
		})
	}
}

func TestReplaceCapsLines(t *testing.T) {
	t.Parallel()
	_, err := Replace([]byte(strings.Repeat("x\n", 15)), "x", "y")
	var me *MatchError
	if !errors.As(err, &me) || me.Count != 15 || len(me.Lines) != 10 || me.Lines[9] != 10 {
		t.Fatalf("error %#v", err)
	}
	if !strings.Contains(err.Error(), "(lines 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, ...)") {
		t.Errorf("message %q lacks the capped list", err)
	}
}

func TestReplaceEmptyOld(t *testing.T) {
	t.Parallel()
	if _, err := Replace([]byte("a"), "", "b"); !errors.Is(err, ErrEmptyOld) {
		t.Fatalf("error %v, want ErrEmptyOld", err)
	}
}
