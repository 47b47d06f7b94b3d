package editformat

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wrenchworks/wrench/diff"
)

// Inline seeds let the fuzz tests run as unit tests without the corpus.
const (
	seedFile  = "line1\nnaïve café\n\tindented  \nline4"
	seedPatch = "*** Begin Patch\n*** Update File: f.txt\n*** Move to: g.txt\n@@ line1\n naïve café\n-\tindented\n+changed\n" +
		"*** End of File\n*** Add File: new.txt\n+hello\n\n+world\n*** Delete File: old.txt\n*** End Patch\n"
)

// patchCorpus returns (patch, file content) pairs from the Codex scenarios,
// when the conformance data is present.
func patchCorpus() [][2]string {
	conf, err := findConformance()
	if err != nil {
		return nil
	}
	root := filepath.Join(conf, "codex-apply-patch", "scenarios")
	dirs, _ := os.ReadDir(root)
	var out [][2]string
	for _, d := range dirs {
		if !d.IsDir() {
			continue
		}
		patch, err := os.ReadFile(filepath.Join(root, d.Name(), "patch.txt"))
		if err != nil {
			continue
		}
		content := ""
		_ = filepath.WalkDir(filepath.Join(root, d.Name(), "input"), func(p string, e fs.DirEntry, err error) error {
			if err == nil && !e.IsDir() && content == "" {
				data, _ := os.ReadFile(p)
				content = string(data)
			}
			return nil
		})
		out = append(out, [2]string{string(patch), content})
	}
	return out
}

// searchReplaceCorpus returns (original, edit) pairs from search-replace.json,
// when the conformance data is present.
func searchReplaceCorpus() [][2]string {
	conf, err := findConformance()
	if err != nil {
		return nil
	}
	data, err := os.ReadFile(filepath.Join(conf, "search-replace.json"))
	if err != nil {
		return nil
	}
	var cases []srCase
	if json.Unmarshal(data, &cases) != nil {
		return nil
	}
	out := make([][2]string, 0, len(cases))
	for _, c := range cases {
		orig := ""
		if c.Original != nil {
			orig = *c.Original
		}
		out = append(out, [2]string{orig, c.Edit})
	}
	return out
}

func FuzzParsePatch(f *testing.F) {
	f.Add(seedPatch)
	f.Add("*** Begin Patch\n*** End Patch")
	f.Add("<<'EOF'\n*** Begin Patch\n*** Update File: a\n@@ x\n@@ y\n+z\nEOF")
	for _, c := range patchCorpus() {
		f.Add(c[0])
	}
	f.Fuzz(func(t *testing.T, text string) {
		p, err := ParsePatch(text)
		if err != nil {
			var pe *PatchError
			if !errors.As(err, &pe) || p != nil {
				t.Fatalf("ParsePatch = %v, %v; want nil and a *PatchError", p, err)
			}
			return
		}
		if len(p.Ops) == 0 {
			t.Fatal("a parsed patch has no operations")
		}
		for _, op := range p.Ops {
			if op.Path == "" {
				t.Fatalf("operation without a path: %+v", op)
			}
			if op.Kind == OpUpdate && len(op.Chunks) == 0 {
				t.Fatalf("update without chunks: %+v", op)
			}
			for _, c := range op.Chunks {
				if len(c.Old) == 0 && len(c.New) == 0 {
					t.Fatalf("empty chunk: %+v", op)
				}
			}
			if op.Kind == OpAdd && len(op.Content) > 0 && op.Content[len(op.Content)-1] != '\n' {
				t.Fatalf("added content %q lacks its final newline", op.Content)
			}
		}
	})
}

// fuzzReader makes about a third of the paths missing and some directories,
// deterministically, serving content for the rest.
func fuzzReader(content string) FileReader {
	return func(name string) ([]byte, error) {
		sum := 0
		for i := 0; i < len(name); i++ {
			sum += int(name[i])
		}
		switch {
		case sum%3 == 0:
			return nil, fs.ErrNotExist
		case sum%7 == 0:
			return nil, fmt.Errorf("%s: %w", name, ErrIsDir)
		}
		return []byte(content), nil
	}
}

func FuzzApplyPatch(f *testing.F) {
	f.Add(seedPatch, seedFile)
	f.Add("*** Begin Patch\n*** Update File: a\n@@\n-x\n+y\n*** End Patch", "x\r\ny\r\n")
	f.Add("*** Begin Patch\n*** Update File: b\n@@ “q”\n+add\n*** End Patch", "\"q\"\n")
	for _, c := range patchCorpus() {
		f.Add(c[0], c[1])
	}
	f.Fuzz(func(t *testing.T, text, content string) {
		for _, maxFuzz := range []int{0, MaxFuzzExact, FuzzWhitespace} {
			changes, err := ApplyPatch(text, fuzzReader(content), PatchOptions{MaxFuzz: maxFuzz})
			if err != nil {
				var pe *PatchError
				var oe *OpError
				if changes != nil || !errors.As(err, &pe) && !errors.As(err, &oe) {
					t.Fatalf("ApplyPatch = %d changes, %v", len(changes), err)
				}
				continue
			}
			for _, c := range changes {
				if c.Path == "" || c.Before == nil && c.After == nil {
					t.Fatalf("bad change %+v", c)
				}
				if c.Fuzz > max(PatchOptions{MaxFuzz: maxFuzz}.maxFuzz(), 0) {
					t.Fatalf("fuzz %d above the limit %d", c.Fuzz, maxFuzz)
				}
				checkDiffCounts(t, c.Path, c.Before, c.After)
			}
		}
		// Codex mode may return the changes made before a failure.
		changes, err := ApplyPatch(text, fuzzReader(content), PatchOptions{Codex: true})
		var pe *PatchError
		var oe *OpError
		if err != nil && !errors.As(err, &pe) && !errors.As(err, &oe) {
			t.Fatalf("codex mode: %v", err)
		}
		for _, c := range changes {
			if c.Path == "" || c.Before == nil && c.After == nil {
				t.Fatalf("codex mode: bad change %+v", c)
			}
		}
	})
}

func FuzzApplySearchReplace(f *testing.F) {
	f.Add("a\nb\nc", "------- SEARCH\nb\n=======\nB\n+++++++ REPLACE")
	f.Add("    x\n    y\n", "f.py\n<<<<<<< SEARCH\n\nx\ny\n=======\nz\n>>>>>>> REPLACE\n")
	f.Add("a\r\nb\r\n", "------- SEARCH\nb\n=======\n+++++++ REPLACE\n------- SEARCH\na\n=======\nA\n")
	for _, c := range searchReplaceCorpus() {
		f.Add(c[0], c[1])
	}
	f.Fuzz(func(t *testing.T, original, diff string) {
		got, infos, err := ApplySearchReplace([]byte(original), diff)
		if err != nil {
			var se *SearchReplaceError
			if got != nil || infos != nil || !errors.As(err, &se) || se.Kind != KindNoMatch && se.Kind != KindMalformed {
				t.Fatalf("ApplySearchReplace = %q, %v, %v", got, infos, err)
			}
		} else {
			if len(infos) == 0 {
				t.Fatal("success without a block")
			}
			checkDiffCounts(t, "f", []byte(original), got)
		}
		if blocks, err := ParseSearchReplace(diff); err == nil && len(blocks) == 0 {
			t.Fatal("ParseSearchReplace succeeded with no block")
		}
	})
}

// checkDiffCounts renders a diff and checks its counts against its lines.
func checkDiffCounts(t *testing.T, path string, before, after []byte) {
	t.Helper()
	text, added, removed := diff.Unified(path, before, after)
	plus, minus := 0, 0
	for i, l := range strings.Split(text, "\n") {
		switch {
		case i < 2:
		case strings.HasPrefix(l, "+"):
			plus++
		case strings.HasPrefix(l, "-"):
			minus++
		}
	}
	if plus != added || minus != removed {
		t.Fatalf("diff counts +%d -%d, lines +%d -%d:\n%s", added, removed, plus, minus, text)
	}
}
