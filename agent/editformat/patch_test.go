package editformat

import (
	"errors"
	"fmt"
	"io/fs"
	"reflect"
	"strings"
	"testing"
)

// mapReader serves files from a map; names ending in "/" are directories.
func mapReader(files map[string]string) FileReader {
	return func(name string) ([]byte, error) {
		if _, ok := files[name+"/"]; ok {
			return nil, ErrIsDir
		}
		data, ok := files[name]
		if !ok {
			return nil, fmt.Errorf("open %s: %w", name, fs.ErrNotExist)
		}
		return []byte(data), nil
	}
}

func patchText(lines ...string) string {
	return "*** Begin Patch\n" + strings.Join(lines, "\n") + "\n*** End Patch\n"
}

func TestApplyPatchFuzz(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		file      string
		hunk      []string
		maxFuzz   int
		want      string
		wantFuzz  int
		wantError error
	}{
		{name: "exact", file: "a\nb\nc\n", hunk: []string{" a", "-b", "+B"}, want: "a\nB\nc\n", wantFuzz: FuzzExact},
		{name: "trailing whitespace", file: "a  \nb\t\nc\n", hunk: []string{" a", "-b", "+B"}, want: "a  \nB\nc\n", wantFuzz: FuzzTrailingSpace},
		{name: "indentation", file: "  a\n  b\nc\n", hunk: []string{" a", "-b", "+B"}, want: "  a\nB\nc\n", wantFuzz: FuzzWhitespace},
		{
			name: "typographic punctuation", file: "say “hi” — ok\nx\n", hunk: []string{`-say "hi" - ok`, "+say hi"},
			want: "say hi\nx\n", wantFuzz: FuzzPunctuation,
		},
		{
			name: "refused above MaxFuzz", file: "  a\n  b\n", hunk: []string{" a", "-b", "+B"},
			maxFuzz: FuzzTrailingSpace, wantError: ErrTooFuzzy,
		},
		{
			name: "exact only", file: "a \nb\n", hunk: []string{" a", "-b", "+B"},
			maxFuzz: MaxFuzzExact, wantError: ErrTooFuzzy,
		},
		{
			name: "exact only, exact match", file: "a\nb\n", hunk: []string{" a", "-b", "+B"},
			maxFuzz: MaxFuzzExact, want: "a\nB\n",
		},
		{name: "not found", file: "a\nb\n", hunk: []string{"-zzz", "+y"}, wantError: ErrNoMatch},
		{
			name: "strictest level wins over earlier looser match", file: "  b\nb\n", hunk: []string{"-b", "+B"},
			want: "  b\nB\n", wantFuzz: FuzzExact,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			text := patchText(append([]string{"*** Update File: f.txt", "@@"}, tt.hunk...)...)
			changes, err := ApplyPatch(text, mapReader(map[string]string{"f.txt": tt.file}), PatchOptions{MaxFuzz: tt.maxFuzz})
			if tt.wantError != nil {
				if !errors.Is(err, tt.wantError) || changes != nil {
					t.Fatalf("error %v (changes %v), want %v", err, changes, tt.wantError)
				}
				var oe *OpError
				if !errors.As(err, &oe) || oe.Op != 1 || oe.Kind != OpUpdate || oe.Path != "f.txt" {
					t.Errorf("error %#v, want an *OpError for op 1 update f.txt", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(changes) != 1 || string(changes[0].After) != tt.want || changes[0].Fuzz != tt.wantFuzz {
				t.Fatalf("changes %+v, want After %q Fuzz %d", changes, tt.want, tt.wantFuzz)
			}
		})
	}
}

func TestApplyPatchSemantics(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		files map[string]string
		patch string
		want  []Change
	}{
		{
			name:  "file without final newline gets one",
			files: map[string]string{"f": "a\nb"},
			patch: patchText("*** Update File: f", "@@", "-a", "+A"),
			want:  []Change{{Path: "f", Before: []byte("a\nb"), After: []byte("A\nb\n")}},
		},
		{
			name:  "CRLF file stays CRLF",
			files: map[string]string{"f": "a\r\nb\r\n"},
			patch: patchText("*** Update File: f", "@@", " a", "-b", "+B", "+C"),
			want:  []Change{{Path: "f", Before: []byte("a\r\nb\r\n"), After: []byte("a\r\nB\r\nC\r\n")}},
		},
		{
			name:  "pure addition after @@ header",
			files: map[string]string{"f": "func a() {\n}\nfunc b() {\n}\n"},
			patch: patchText("*** Update File: f", "@@ func a() {", "+\tx()"),
			want: []Change{{Path: "f", Before: []byte("func a() {\n}\nfunc b() {\n}\n"),
				After: []byte("func a() {\n\tx()\n}\nfunc b() {\n}\n")}},
		},
		{
			name:  "nested @@ headers",
			files: map[string]string{"f": "class A:\n  def m():\n    pass\nclass B:\n  def m():\n    pass\n"},
			patch: patchText("*** Update File: f", "@@ class B:", "@@   def m():", "-    pass", "+    return 1"),
			want: []Change{{Path: "f", Before: []byte("class A:\n  def m():\n    pass\nclass B:\n  def m():\n    pass\n"),
				After: []byte("class A:\n  def m():\n    pass\nclass B:\n  def m():\n    return 1\n")}},
		},
		{
			name:  "@@ header as a line prefix",
			files: map[string]string{"f": "x\nclass A(Base):\n  x\n"},
			patch: patchText("*** Update File: f", "@@ class A", "-  x", "+  y"),
			want:  []Change{{Path: "f", Before: []byte("x\nclass A(Base):\n  x\n"), After: []byte("x\nclass A(Base):\n  y\n")}},
		},
		{
			name:  "end of file chunk prefers the end",
			files: map[string]string{"f": "x\ny\nx\n"},
			patch: patchText("*** Update File: f", "@@", "-x", "+z", "*** End of File"),
			want:  []Change{{Path: "f", Before: []byte("x\ny\nx\n"), After: []byte("x\ny\nz\n")}},
		},
		{
			name:  "add then update the same file",
			files: map[string]string{},
			patch: patchText("*** Add File: n.txt", "+one", "*** Update File: n.txt", "@@", "-one", "+two"),
			want: []Change{
				{Path: "n.txt", After: []byte("one\n")},
				{Path: "n.txt", Before: []byte("one\n"), After: []byte("two\n")},
			},
		},
		{
			name:  "delete then add the same path",
			files: map[string]string{"f": "old\n"},
			patch: patchText("*** Delete File: f", "*** Add File: f", "+new"),
			want:  []Change{{Path: "f", Before: []byte("old\n")}, {Path: "f", After: []byte("new\n")}},
		},
		{
			name:  "move frees the source path",
			files: map[string]string{"a": "x\n"},
			patch: patchText("*** Update File: a", "*** Move to: b", "@@", "-x", "+y", "*** Add File: a", "+fresh"),
			want: []Change{
				{Path: "b", From: "a", Before: []byte("x\n"), After: []byte("y\n")},
				{Path: "a", After: []byte("fresh\n")},
			},
		},
		{
			name:  "move to the same path is an update",
			files: map[string]string{"a": "x\n"},
			patch: patchText("*** Update File: a", "*** Move to: ./a", "@@", "-x", "+y"),
			want:  []Change{{Path: "a", Before: []byte("x\n"), After: []byte("y\n")}},
		},
		{
			name:  "add an empty file",
			files: map[string]string{},
			patch: patchText("*** Add File: empty"),
			want:  []Change{{Path: "empty", After: []byte{}}},
		},
		{
			name:  "every line removed",
			files: map[string]string{"f": "a\n"},
			patch: patchText("*** Update File: f", "@@", "-a"),
			want:  []Change{{Path: "f", Before: []byte("a\n"), After: []byte{}}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := ApplyPatch(tt.patch, mapReader(tt.files), PatchOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("changes\n%+v\nwant\n%+v", got, tt.want)
			}
		})
	}
}

func TestApplyPatchErrors(t *testing.T) {
	t.Parallel()
	files := map[string]string{"a": "x\n", "b": "y\n", "dir/": ""}
	readFailure := errors.New("permission denied")
	tests := []struct {
		name    string
		patch   string
		read    FileReader
		op      int
		kind    OpKind
		is      error
		message string
	}{
		{
			name:  "atomic: a later failure returns no change",
			patch: patchText("*** Add File: new", "+n", "*** Delete File: a", "*** Update File: gone", "@@", "-x", "+y"),
			op:    3, kind: OpUpdate, is: fs.ErrNotExist, message: "patch operation 3 (update gone): gone: file does not exist",
		},
		{
			name:  "add onto an existing file",
			patch: patchText("*** Add File: a", "+z"),
			op:    1, kind: OpAdd, is: fs.ErrExist, message: "patch operation 1 (add a): a: file already exists; use Update File to change it",
		},
		{
			name:  "add onto a directory",
			patch: patchText("*** Add File: dir", "+z"),
			op:    1, kind: OpAdd, is: fs.ErrExist,
		},
		{
			name:  "add twice",
			patch: patchText("*** Add File: n", "+1", "*** Add File: n", "+2"),
			op:    2, kind: OpAdd, is: fs.ErrExist,
		},
		{
			name:  "move onto an existing file",
			patch: patchText("*** Update File: a", "*** Move to: b", "@@", "-x", "+z"),
			op:    1, kind: OpUpdate, is: fs.ErrExist,
			message: "patch operation 1 (update a -> b): move destination b: file already exists; delete it first or move elsewhere",
		},
		{
			name:  "update a directory",
			patch: patchText("*** Update File: dir", "@@", "-x", "+z"),
			op:    1, kind: OpUpdate, is: ErrIsDir,
		},
		{
			name:  "update a deleted file",
			patch: patchText("*** Delete File: a", "*** Update File: a", "@@", "-x", "+z"),
			op:    2, kind: OpUpdate, is: fs.ErrNotExist,
		},
		{
			name:  "@@ header not found",
			patch: patchText("*** Update File: a", "@@ func nowhere()", "-x", "+z"),
			op:    1, kind: OpUpdate, is: ErrNoMatch,
		},
		{
			name:  "second hunk must come after the first",
			patch: patchText("*** Update File: a", "@@", "-x", "+z", "@@", "-x", "+w"),
			op:    1, kind: OpUpdate, is: ErrNoMatch,
		},
		{
			name:  "reader failure",
			patch: patchText("*** Delete File: a"),
			read:  func(string) ([]byte, error) { return nil, readFailure },
			op:    1, kind: OpDelete, is: readFailure,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			read := tt.read
			if read == nil {
				read = mapReader(files)
			}
			changes, err := ApplyPatch(tt.patch, read, PatchOptions{})
			if changes != nil {
				t.Errorf("changes %+v returned with error %v", changes, err)
			}
			var oe *OpError
			if !errors.As(err, &oe) {
				t.Fatalf("error %v, want *OpError", err)
			}
			if oe.Op != tt.op || oe.Kind != tt.kind || !errors.Is(err, tt.is) {
				t.Errorf("error %v (op %d kind %s), want op %d kind %s wrapping %v", err, oe.Op, oe.Kind, tt.op, tt.kind, tt.is)
			}
			if tt.message != "" && err.Error() != tt.message {
				t.Errorf("message\n%q\nwant\n%q", err.Error(), tt.message)
			}
		})
	}
}

func TestParsePatch(t *testing.T) {
	t.Parallel()
	update := FileOp{Kind: OpUpdate, Path: "f", Chunks: []Chunk{{Old: []string{"a"}, New: []string{"b"}}}}
	tests := []struct {
		name string
		text string
		want []FileOp
	}{
		{name: "plain", text: "*** Begin Patch\n*** Update File: f\n@@\n-a\n+b\n*** End Patch\n", want: []FileOp{update}},
		{name: "CRLF", text: "*** Begin Patch\r\n*** Update File: f\r\n@@\r\n-a\r\n+b\r\n*** End Patch\r\n", want: []FileOp{update}},
		{name: "heredoc", text: "<<'EOF'\n*** Begin Patch\n*** Update File: f\n@@\n-a\n+b\n*** End Patch\nEOF\n", want: []FileOp{update}},
		{name: "fence", text: "```diff\n*** Begin Patch\n*** Update File: f\n@@\n-a\n+b\n*** End Patch\n```", want: []FileOp{update}},
		{name: "first hunk without @@", text: "*** Begin Patch\n*** Update File: f\n-a\n+b\n*** End Patch", want: []FileOp{update}},
		{name: "padded markers", text: "  *** Begin Patch\n *** Update File:   f  \n  @@  \n-a\n+b\n*** End Patch  ", want: []FileOp{update}},
		{
			name: "chunks, context, blank lines, end of file",
			text: patchText("*** Update File: f", "*** Move to: g", "@@ func a()", " x", "", "-y", "+z", "", "@@", "-q", "*** End of File"),
			want: []FileOp{{Kind: OpUpdate, Path: "f", MoveTo: "g", Chunks: []Chunk{
				{Context: "func a()", Old: []string{"x", "", "y"}, New: []string{"x", "", "z"}},
				{Old: []string{"q"}, New: nil, EndOfFile: true},
			}}},
		},
		{
			name: "nested @@ headers",
			text: patchText("*** Update File: f", "@@ class A", "@@ def m():", "-a", "+b"),
			want: []FileOp{{Kind: OpUpdate, Path: "f", Chunks: []Chunk{{Context: "class A\ndef m():", Old: []string{"a"}, New: []string{"b"}}}}},
		},
		{
			name: "add with blank lines and delete",
			text: patchText("*** Add File: n", "+a", "", "+c", "", "*** Delete File: d"),
			want: []FileOp{{Kind: OpAdd, Path: "n", Content: []byte("a\n\nc\n")}, {Kind: OpDelete, Path: "d"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p, err := ParsePatch(tt.text)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(p.Ops, tt.want) {
				t.Errorf("ops\n%#v\nwant\n%#v", p.Ops, tt.want)
			}
		})
	}
}

func TestParsePatchErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		text string
		line int
		msg  string
	}{
		{name: "empty", text: "", msg: "must start with '*** Begin Patch'"},
		{name: "no begin", text: "*** Update File: f\n", line: 1, msg: "first line of the patch must be '*** Begin Patch'"},
		{name: "no end", text: "*** Begin Patch\n*** Delete File: f\n", line: 2, msg: "last line of the patch must be '*** End Patch'"},
		{name: "no operations", text: "*** Begin Patch\n*** End Patch\n", msg: "no file operations"},
		{name: "unknown header", text: patchText("*** Delete File: f", "*** Frobnicate File: g"), line: 3, msg: "not a valid file operation header"},
		{name: "path missing", text: patchText("*** Delete File:  "), line: 2, msg: "has no path"},
		{name: "update without hunk", text: patchText("*** Update File: f", "*** Delete File: g"), line: 2, msg: "has no hunk"},
		{name: "bad first hunk line", text: patchText("*** Update File: f", "@@", "x"), line: 4, msg: "unexpected line in hunk"},
		{name: "second hunk without @@", text: patchText("*** Update File: f", "@@", "-a", "", "x"), line: 6, msg: "expected a hunk to start with an @@ line"},
		{name: "empty hunk", text: patchText("*** Update File: f", "@@", "*** End of File"), line: 4, msg: "the hunk has no lines"},
		{name: "junk in add", text: patchText("*** Add File: f", "+a", "b"), line: 4, msg: "every line of a new file starts with '+'"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := ParsePatch(tt.text)
			var pe *PatchError
			if !errors.As(err, &pe) {
				t.Fatalf("error %v, want *PatchError", err)
			}
			if pe.Line != tt.line || !strings.Contains(pe.Msg, tt.msg) {
				t.Errorf("error %v (line %d), want line %d with %q", err, pe.Line, tt.line, tt.msg)
			}
		})
	}
}

func TestApplyPatchCodexMode(t *testing.T) {
	read := mapReader(map[string]string{"a.txt": "old\n", "b.txt": "b\n"})
	add := "*** Begin Patch\n*** Add File: a.txt\n+new\n*** End Patch\n"
	move := "*** Begin Patch\n*** Update File: a.txt\n*** Move to: b.txt\n@@\n-old\n+moved\n*** End Patch\n"
	partial := "*** Begin Patch\n*** Add File: c.txt\n+c\n*** Update File: missing.txt\n@@\n-x\n+y\n*** End Patch\n"
	for _, text := range []string{add, move, partial} {
		if ch, err := ApplyPatch(text, read, PatchOptions{}); err == nil || ch != nil {
			t.Errorf("strict mode accepted %q: %v %v", text, ch, err)
		}
	}
	ch, err := ApplyPatch(add, read, PatchOptions{Codex: true})
	if err != nil || len(ch) != 1 || string(ch[0].Before) != "old\n" || string(ch[0].After) != "new\n" {
		t.Errorf("codex add over a file: %+v %v", ch, err)
	}
	ch, err = ApplyPatch(move, read, PatchOptions{Codex: true})
	if err != nil || len(ch) != 1 || ch[0].Path != "b.txt" || ch[0].From != "a.txt" || string(ch[0].After) != "moved\n" {
		t.Errorf("codex move onto a file: %+v %v", ch, err)
	}
	ch, err = ApplyPatch(partial, read, PatchOptions{Codex: true})
	if err == nil || len(ch) != 1 || ch[0].Path != "c.txt" {
		t.Errorf("codex partial failure: %+v %v", ch, err)
	}
}
