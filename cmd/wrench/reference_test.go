package main

import (
	"bytes"
	"context"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
)

// TestReferenceDoc: docs/reference.md lists every flag of every command
// with its default, and every environment variable the code reads.
func TestReferenceDoc(t *testing.T) {
	path := filepath.Join(moduleRoot(t), "docs", "reference.md")
	checkFlagReference(t, path, true)
	checkEnvReference(t, path, true)
}

// flagSets returns every command's flag sets ("wrench run", "wrench image
// build", …), as the commands build them with an empty environment, so
// the defaults are the built-in ones.
func flagSets(t *testing.T) map[string]*flag.FlagSet {
	t.Helper()
	sets := map[string]*flag.FlagSet{}
	for name, c := range commands() {
		if c.hidden {
			continue
		}
		args := [][]string{{name, "-h"}}
		for _, sub := range groups[name] {
			args = append(args, []string{name, sub, "-h"})
		}
		for _, a := range args {
			var out bytes.Buffer
			env := &cliEnv{stdin: strings.NewReader(""), stdout: &out, stderr: &out, getenv: func(string) string { return "" },
				sawFlags: func(fs *flag.FlagSet) { sets[fs.Name()] = fs }}
			dispatch(context.Background(), env, a)
		}
	}
	return sets
}

var (
	headingRe   = regexp.MustCompile(`^#{1,6} `)
	commandRe   = regexp.MustCompile("`(wrench [a-z]+(?: [a-z]+)?)`")
	flagRe      = regexp.MustCompile("`(--[a-z][a-z0-9-]*)[^`]*`")
	backtickRe  = regexp.MustCompile("`([^`]*)`")
	tableSepRe  = regexp.MustCompile(`^\|[-| :]+\|$`)
	envNameRe   = regexp.MustCompile("^`([A-Z][A-Z0-9_]+)`$")
	zeroDefault = map[string]bool{"": true, "0": true, "false": true, "0s": true}
)

// docTable is a Markdown table with the commands its section is about.
type docTable struct {
	commands []string
	header   []string
	rows     [][]string
	line     int
}

// readDoc splits a Markdown document into tables, each with the commands
// in force: those a heading names in backticks (`wrench run`), plus those
// a "Flags of …" line under it names. It also returns every flag mention
// with its commands.
func readDoc(t *testing.T, path string, known map[string]*flag.FlagSet) (tables []docTable, mentions map[string][]string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read %s: %v", path, err)
	}
	mentions = map[string][]string{} // "--flag" -> contexts ("" for none)
	var ctx []string
	names := func(line string) []string {
		var out []string
		for _, m := range commandRe.FindAllStringSubmatch(line, -1) {
			if known[m[1]] != nil {
				out = append(out, m[1])
			}
		}
		return out
	}
	var cur *docTable
	for i, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		switch {
		case headingRe.MatchString(line):
			ctx = names(line)
		case strings.HasPrefix(line, "Flags of "):
			ctx = append(ctx, names(line)...)
		}
		if strings.HasPrefix(line, "|") {
			cells := splitRow(line)
			switch {
			case cur == nil:
				cur = &docTable{commands: slices.Clone(ctx), header: cells, line: i + 1}
			case tableSepRe.MatchString(line):
			default:
				cur.rows = append(cur.rows, cells)
			}
		} else if cur != nil {
			tables = append(tables, *cur)
			cur = nil
		}
		for _, m := range flagRe.FindAllStringSubmatch(line, -1) {
			mentions[m[1]] = append(mentions[m[1]], strings.Join(ctx, ","))
		}
	}
	if cur != nil {
		tables = append(tables, *cur)
	}
	return tables, mentions
}

func splitRow(line string) []string {
	line = strings.Trim(line, "|")
	parts := regexp.MustCompile(`[^\\]\|`).FindAllStringIndex(line, -1)
	var cells []string
	start := 0
	for _, p := range parts {
		cells = append(cells, strings.TrimSpace(line[start:p[0]+1]))
		start = p[1]
	}
	return append(cells, strings.TrimSpace(line[start:]))
}

func column(header []string, name string) int {
	for i, h := range header {
		if strings.EqualFold(h, name) {
			return i
		}
	}
	return -1
}

// checkFlagReference checks the flags a Markdown document names against
// the commands: a flag named under a section about commands (a heading
// naming `wrench X`, or a "Flags of `wrench X`, …" line) must be one of
// theirs, and one named elsewhere one of some command's; in a table with
// "flag" and "default" columns, the default must be the flag's (the first
// backticked word that is not a $VARIABLE; none means empty, zero or off).
// With complete, every flag of every command must be in such a table under
// its command. Other documents (docs/operations.md) can be checked with it
// too, without complete.
func checkFlagReference(t *testing.T, path string, complete bool) {
	t.Helper()
	sets := flagSets(t)
	tables, mentions := readDoc(t, path, sets)
	documented := map[string]bool{} // "wrench run --out"
	lookup := func(cmds []string, name string) []*flag.Flag {
		var out []*flag.Flag
		for c, fs := range sets {
			if len(cmds) > 0 && !slices.Contains(cmds, c) {
				continue
			}
			if f := fs.Lookup(strings.TrimPrefix(name, "--")); f != nil {
				out = append(out, f)
			}
		}
		return out
	}
	for name, ctxs := range mentions {
		for _, ctx := range ctxs {
			var cmds []string
			if ctx != "" {
				cmds = strings.Split(ctx, ",")
			}
			if len(lookup(cmds, name)) == 0 {
				where := "any command"
				if ctx != "" {
					where = ctx
				}
				t.Errorf("%s: %s is not a flag of %s", path, name, where)
			}
		}
	}
	for _, tb := range tables {
		fc, dc := column(tb.header, "flag"), column(tb.header, "default")
		if fc < 0 || dc < 0 {
			continue
		}
		for _, row := range tb.rows {
			if fc >= len(row) || dc >= len(row) {
				t.Errorf("%s:%d: short row %q", path, tb.line, row)
				continue
			}
			m := flagRe.FindStringSubmatch(row[fc])
			if m == nil {
				t.Errorf("%s:%d: row %q names no flag", path, tb.line, row)
				continue
			}
			want := ""
			for _, b := range backtickRe.FindAllStringSubmatch(row[dc], -1) {
				if !strings.HasPrefix(b[1], "$") {
					want = b[1]
					break
				}
			}
			if len(tb.commands) == 0 {
				t.Errorf("%s:%d: the table of %s is under no command", path, tb.line, m[1])
			}
			for _, c := range tb.commands {
				f := sets[c].Lookup(strings.TrimPrefix(m[1], "--"))
				if f == nil {
					continue // reported as a mention
				}
				documented[c+" "+m[1]] = true
				if f.DefValue != want && !(zeroDefault[f.DefValue] && want == "") {
					t.Errorf("%s: %s %s: documented default %q, the flag's is %q", path, c, m[1], want, f.DefValue)
				}
			}
		}
	}
	if !complete {
		return
	}
	var missing []string
	for c, fs := range sets {
		fs.VisitAll(func(f *flag.Flag) {
			if !documented[c+" --"+f.Name] {
				name, usage := valueName(f)
				def := ""
				if !zeroDefault[f.DefValue] {
					def = "`" + f.DefValue + "`"
				}
				missing = append(missing, c+": | `--"+f.Name+" "+name+"` | "+def+" | "+usage+" |")
			}
		})
	}
	sort.Strings(missing)
	for _, m := range missing {
		t.Errorf("%s lacks the row %s", path, m)
	}
}

// envRead matches how the code reads an environment variable: through a
// getenv function, or as an Env… constant (llm's).
var envRead = regexp.MustCompile(`(?:[Gg]etenv|LookupEnv)\("([A-Z][A-Z0-9_]*)"\)|\bEnv[A-Za-z]*\s*=\s*"([A-Z][A-Z0-9_]*)"`)

// externalEnv are variables libraries read (the Docker client).
var externalEnv = []string{"DOCKER_HOST"}

// codeEnv returns the environment variables the module's non-test code
// reads (test helpers' packages, named *test, excluded).
func codeEnv(t *testing.T) map[string]bool {
	t.Helper()
	root := moduleRoot(t)
	vars := map[string]bool{}
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") || strings.HasSuffix(d.Name(), "test") || d.Name() == "testdata") && p != root {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		for _, m := range envRead.FindAllStringSubmatch(string(b), -1) {
			vars[m[1]+m[2]] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return vars
}

// checkEnvReference checks the tables with a "variable" column: each
// variable must be read by the code, the Makefile or the script its "read
// by" cell names; with complete, every variable the code reads must be
// listed.
func checkEnvReference(t *testing.T, path string, complete bool) {
	t.Helper()
	code := codeEnv(t)
	root := moduleRoot(t)
	tables, _ := readDoc(t, path, nil)
	listed := map[string]bool{}
	for _, tb := range tables {
		vc, rc := column(tb.header, "variable"), column(tb.header, "read by")
		if vc < 0 {
			continue
		}
		for _, row := range tb.rows {
			m := envNameRe.FindStringSubmatch(row[vc])
			if m == nil {
				t.Errorf("%s:%d: %q is not a `VARIABLE`", path, tb.line, row[vc])
				continue
			}
			name := m[1]
			listed[name] = true
			if code[name] || slices.Contains(externalEnv, name) {
				continue
			}
			found := false
			if rc >= 0 && rc < len(row) {
				for _, f := range strings.Split(row[rc], ",") {
					f = strings.TrimSpace(f)
					if f != "Makefile" && !strings.HasPrefix(f, "scripts/") {
						continue
					}
					b, _ := os.ReadFile(filepath.Join(root, f))
					if regexp.MustCompile(`\$\{?`+name+`\b|^`+name+`\s*[?:]?=`).Match(b) ||
						regexp.MustCompile(`(?m)^`+name+`\s*[?:]?=`).Match(b) {
						found = true
					}
				}
			}
			if !found {
				t.Errorf("%s: %s is read by nothing it names (code, Makefile, scripts/)", path, name)
			}
		}
	}
	if !complete {
		return
	}
	for name := range code {
		if !listed[name] {
			t.Errorf("%s does not list the environment variable %s", path, name)
		}
	}
}
