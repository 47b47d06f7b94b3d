package editformat

import (
	"bytes"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// conformanceDir returns ../shared/conformance relative to the module root,
// skipping the test when it is absent (failing under CI=true).
func conformanceDir(tb testing.TB) string {
	tb.Helper()
	conf, err := findConformance()
	if err != nil {
		if os.Getenv("CI") == "true" {
			tb.Fatalf("conformance data required under CI=true: %v", err)
		}
		tb.Skipf("conformance data not found, skipping: %v", err)
	}
	return conf
}

// findConformance walks up from the working directory to the module root
// (the directory with go.mod) and returns its ../shared/conformance.
func findConformance() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			break
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod above the working directory")
		}
		dir = parent
	}
	conf := filepath.Join(dir, "..", "shared", "conformance")
	if _, err := os.Stat(conf); err != nil {
		return "", err
	}
	return conf, nil
}

// codexDivergences are the scenarios where Wrench deliberately refuses what
// Codex does (conformance README, "Where Wrench deliberately differs from
// Codex"): the tree must stay exactly input/ and the error must name the
// conflicting path.
var codexDivergences = map[string]string{
	"010_move_overwrites_existing_destination":         "renamed/dir/name.txt",
	"011_add_overwrites_existing_file":                 "duplicate.txt",
	"015_failure_after_partial_success_leaves_changes": "missing.txt",
}

// codexMustFail are the scenarios that must return an error (the README's
// stricter check, plus the divergences).
var codexMustFail = map[string]bool{
	"005_rejects_empty_patch":                          true,
	"006_rejects_missing_context":                      true,
	"007_rejects_missing_file_delete":                  true,
	"008_rejects_empty_update_hunk":                    true,
	"009_requires_existing_file_for_update":            true,
	"010_move_overwrites_existing_destination":         true,
	"011_add_overwrites_existing_file":                 true,
	"012_delete_directory_fails":                       true,
	"013_rejects_invalid_hunk_header":                  true,
	"015_failure_after_partial_success_leaves_changes": true,
}

func TestCodexScenarios(t *testing.T) {
	root := filepath.Join(conformanceDir(t), "codex-apply-patch", "scenarios")
	entries, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		if e.IsDir() {
			names = append(names, e.Name())
		}
	}
	sort.Strings(names)
	if len(names) != 23 {
		t.Errorf("found %d scenarios, want 23", len(names))
	}
	for _, mode := range []struct {
		name  string
		codex bool
	}{{"wrench", false}, {"codex", true}} {
		passed := 0
		for _, name := range names {
			ok := t.Run(mode.name+"/"+name, func(t *testing.T) {
				dir := filepath.Join(root, name)
				work := t.TempDir()
				copyTree(t, filepath.Join(dir, "input"), work)
				patch, err := os.ReadFile(filepath.Join(dir, "patch.txt"))
				if err != nil {
					t.Fatal(err)
				}
				changes, err := ApplyPatch(string(patch), dirReader(work), PatchOptions{Codex: mode.codex})
				switch {
				case err == nil || mode.codex:
					// Codex keeps what the operations before a failure did.
					writeChanges(t, work, changes)
				case changes != nil:
					t.Errorf("error %v came with %d changes; want none", err, len(changes))
				}
				t.Logf("error: %v", err)

				want := filepath.Join(dir, "expected")
				mustFail := codexMustFail[name]
				if conflict, diverges := codexDivergences[name]; diverges && !mode.codex {
					want = filepath.Join(dir, "input")
					if err == nil || !strings.Contains(err.Error(), conflict) {
						t.Errorf("error %v; want one naming %s", err, conflict)
					}
				} else if diverges && name != "015_failure_after_partial_success_leaves_changes" {
					mustFail = false // Codex overwrites
				}
				if mustFail != (err != nil) {
					t.Errorf("error = %v; want error: %v", err, mustFail)
				}
				compareTrees(t, snapshot(t, want), snapshot(t, work))
			})
			if ok {
				passed++
			}
		}
		if mode.codex {
			t.Logf("codex scenarios, Codex mode: %d/%d identical to Codex's expected trees", passed, len(names))
		} else {
			t.Logf("codex scenarios, Wrench mode (the patch tool's): %d/%d as expected (%d documented divergences: 010, 011, 015)",
				passed, len(names), len(codexDivergences))
		}
	}
}

// dirReader reads files under root the way a tool's FileReader should.
func dirReader(root string) FileReader {
	return func(name string) ([]byte, error) {
		p := filepath.Join(root, filepath.FromSlash(name))
		info, err := os.Stat(p)
		if err != nil {
			return nil, err
		}
		if info.IsDir() {
			return nil, ErrIsDir
		}
		return os.ReadFile(p)
	}
}

// writeChanges writes changes under root in order.
func writeChanges(t *testing.T, root string, changes []Change) {
	t.Helper()
	for _, c := range changes {
		p := filepath.Join(root, filepath.FromSlash(c.Path))
		if c.After == nil {
			if err := os.Remove(p); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, c.After, 0o644); err != nil {
			t.Fatal(err)
		}
		if c.From != "" {
			if err := os.Remove(filepath.Join(root, filepath.FromSlash(c.From))); err != nil {
				t.Fatal(err)
			}
		}
	}
}

func copyTree(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(target, data, 0o644)
	})
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		t.Fatal(err)
	}
}

// entry is a file's bytes, or a directory.
type entry struct {
	isDir bool
	data  []byte
}

// snapshot maps slash-separated relative paths under root to entries; a
// missing root is an empty tree.
func snapshot(t *testing.T, root string) map[string]entry {
	t.Helper()
	tree := map[string]entry{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == root {
			return nil
		}
		rel, _ := filepath.Rel(root, p)
		if d.IsDir() {
			tree[filepath.ToSlash(rel)] = entry{isDir: true}
			return nil
		}
		data, err := os.ReadFile(p)
		tree[filepath.ToSlash(rel)] = entry{data: data}
		return err
	})
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		t.Fatal(err)
	}
	return tree
}

func compareTrees(t *testing.T, want, got map[string]entry) {
	t.Helper()
	for p, w := range want {
		g, ok := got[p]
		switch {
		case !ok:
			t.Errorf("%s: missing", p)
		case w.isDir != g.isDir:
			t.Errorf("%s: isDir %v, want %v", p, g.isDir, w.isDir)
		case !bytes.Equal(w.data, g.data):
			t.Errorf("%s: content %q, want %q", p, g.data, w.data)
		}
	}
	for p := range got {
		if _, ok := want[p]; !ok {
			t.Errorf("%s: unexpected", p)
		}
	}
}

// srCase is one element of search-replace.json.
type srCase struct {
	ID       string  `json:"id"`
	Format   string  `json:"format"`
	Kind     string  `json:"kind"`
	Original *string `json:"original"`
	Edit     string  `json:"edit"`
	Expect   struct {
		OK           bool     `json:"ok"`
		Result       *string  `json:"result"`
		ErrorKind    string   `json:"error_kind"`
		ErrorContain string   `json:"error_contains"`
		BlockCount   *int     `json:"block_count"`
		BlockPaths   []string `json:"block_paths"`
		Blocks       []struct {
			Path            string   `json:"path"`
			Search          *string  `json:"search"`
			Replace         *string  `json:"replace"`
			ReplaceContains []string `json:"replace_contains"`
		} `json:"blocks"`
	} `json:"expect"`
}

// searchReplaceDivergences lists cases Wrench deliberately answers
// differently, with the reason. The conformance README requires every case
// to pass as written, so it is empty.
var searchReplaceDivergences = map[string]string{}

func TestSearchReplaceConformance(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(conformanceDir(t), "search-replace.json"))
	if err != nil {
		t.Fatal(err)
	}
	var cases []srCase
	if err := json.Unmarshal(data, &cases); err != nil {
		t.Fatal(err)
	}
	if len(cases) != 51 {
		t.Errorf("found %d cases, want 51", len(cases))
	}
	passed := 0
	for _, c := range cases {
		ok := t.Run(c.ID, func(t *testing.T) {
			if reason, ok := searchReplaceDivergences[c.ID]; ok {
				t.Skipf("documented divergence: %s", reason)
			}
			switch c.Kind {
			case "apply":
				checkSRApply(t, c)
			case "parse":
				checkSRParse(t, c)
			default:
				t.Fatalf("unknown kind %q", c.Kind)
			}
		})
		if ok {
			passed++
		}
	}
	t.Logf("search-replace: %d/%d (%d documented divergences)", passed-len(searchReplaceDivergences),
		len(cases), len(searchReplaceDivergences))
}

func checkSRApply(t *testing.T, c srCase) {
	var orig []byte
	if c.Original != nil {
		orig = []byte(*c.Original)
	}
	got, infos, err := ApplySearchReplace(orig, c.Edit)
	t.Logf("matches %+v, error %v", infos, err)
	checkSRError(t, c, err)
	if c.Expect.OK && err == nil && string(got) != *c.Expect.Result {
		t.Errorf("result %q, want %q", got, *c.Expect.Result)
	}
}

func checkSRParse(t *testing.T, c srCase) {
	blocks, err := ParseSearchReplace(c.Edit)
	t.Logf("blocks %+v, error %v", blocks, err)
	checkSRError(t, c, err)
	if err != nil {
		return
	}
	e := c.Expect
	if e.BlockCount != nil && len(blocks) != *e.BlockCount {
		t.Errorf("%d blocks, want %d", len(blocks), *e.BlockCount)
	}
	if e.BlockPaths != nil {
		var paths []string
		for _, b := range blocks {
			paths = append(paths, b.Path)
		}
		if strings.Join(paths, "\n") != strings.Join(e.BlockPaths, "\n") {
			t.Errorf("paths %q, want %q", paths, e.BlockPaths)
		}
	}
	if e.Blocks == nil {
		return
	}
	if len(blocks) != len(e.Blocks) {
		t.Fatalf("%d blocks, want %d", len(blocks), len(e.Blocks))
	}
	for i, w := range e.Blocks {
		g := blocks[i]
		if g.Path != w.Path {
			t.Errorf("block %d path %q, want %q", i+1, g.Path, w.Path)
		}
		if w.Search != nil && g.Search != *w.Search {
			t.Errorf("block %d search %q, want %q", i+1, g.Search, *w.Search)
		}
		if w.Replace != nil && g.Replace != *w.Replace {
			t.Errorf("block %d replace %q, want %q", i+1, g.Replace, *w.Replace)
		}
		for _, sub := range w.ReplaceContains {
			if !strings.Contains(g.Replace, sub) {
				t.Errorf("block %d replace %q lacks %q", i+1, g.Replace, sub)
			}
		}
	}
}

// checkSRError maps err to the case's expected outcome.
func checkSRError(t *testing.T, c srCase, err error) {
	t.Helper()
	if c.Expect.OK {
		if err != nil {
			t.Fatalf("unexpected error: %v", err)
		}
		return
	}
	var se *SearchReplaceError
	if !errors.As(err, &se) {
		t.Fatalf("error %v; want a *SearchReplaceError of kind %s", err, c.Expect.ErrorKind)
	}
	if se.Kind != c.Expect.ErrorKind {
		t.Errorf("error kind %s (%v), want %s", se.Kind, err, c.Expect.ErrorKind)
	}
	if c.Expect.ErrorContain != "" && !strings.Contains(err.Error(), c.Expect.ErrorContain) {
		t.Errorf("error %q lacks %q", err, c.Expect.ErrorContain)
	}
}
