package repoconfig

import (
	"errors"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestParseFull(t *testing.T) {
	data, err := os.ReadFile("testdata/full.yaml")
	if err != nil {
		t.Fatal(err)
	}
	f, err := Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	want := &File{
		Image:        Image{Base: "wrench-sandbox:default", Packages: []string{"libsqlite3-dev", "pkg-config"}},
		Setup:        []string{"go mod download", "go build ./..."},
		SetupUser:    "root",
		SetupTimeout: 12 * time.Minute,
		Test:         "go test ./...",
		TestTimeout:  5 * time.Minute,
		Env:          map[string]string{"GOFLAGS": "-mod=mod", "CGO_ENABLED": "1"},
		Egress:       []string{"proxy.golang.org", "*.example.com:8443"},
		AgentEgress:  []string{},
		Limits:       Limits{MaxTurns: 30, MaxCostUSD: 1.5, MaxTokens: 500000, Timeout: 20 * time.Minute, MemoryMB: 4096, CPUs: 1.5, Pids: 1024, DiskMB: 4096},
		Instructions: []string{"AGENTS.md", "docs/notes.md"},
		Manifests:    []string{"tools/*.lock"},
	}
	f.Lines = nil
	if !reflect.DeepEqual(f, want) {
		t.Errorf("got  %+v\nwant %+v", f, want)
	}
}

func TestParseForms(t *testing.T) {
	cases := []struct {
		name  string
		yaml  string
		check func(*File) bool
	}{
		{"empty file", "", func(f *File) bool { return f.Test == "" && len(f.Setup) == 0 }},
		{"comments only", "# nothing yet\n", func(f *File) bool { return f.Test == "" }},
		{"image as a name", "image: golang:1.25\n", func(f *File) bool { return f.Image.Base == "golang:1.25" }},
		{"setup as one script", "setup: |\n  cd sub\n  make deps\n", func(f *File) bool {
			return len(f.Setup) == 1 && f.Setup[0] == "cd sub\nmake deps\n"
		}},
		{"integer cost", "limits: {max_cost_usd: 2}\n", func(f *File) bool { return f.Limits.MaxCostUSD == 2 }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f, err := Parse([]byte(c.yaml))
			if err != nil {
				t.Fatal(err)
			}
			if !c.check(f) {
				t.Errorf("unexpected result %+v", f)
			}
		})
	}
}

func TestParseErrors(t *testing.T) {
	cases := []struct {
		name  string
		yaml  string
		line  int
		field string
		in    string // substring of the problem
	}{
		{"unknown field", "test: make\nsteup: [x]\n", 2, "steup", `did you mean "setup"`},
		{"unknown limit", "limits:\n  max_turn: 3\n", 2, "limits.max_turn", `did you mean "max_turns"`},
		{"wrong type", "limits:\n  max_turns: lots\n", 2, "limits.max_turns", "want a number"},
		{"negative", "limits:\n  memory_mb: -5\n", 2, "limits.memory_mb", "negative"},
		{"bad duration", "setup_timeout: forever\n", 1, "setup_timeout", "duration"},
		{"setup not a list", "setup:\n  a: b\n", 2, "setup", "want a list"},
		{"setup item not a string", "setup:\n  - [x]\n", 2, "setup[0]", "want a string"},
		{"test is a list", "test: [a]\n", 1, "test", "want a string"},
		{"bad user", "setup_user: admin\n", 1, "setup_user", "root or wrench"},
		{"reserved env", "env:\n  HTTP_PROXY: x\n", 1, "env.HTTP_PROXY", "set by Wrench"},
		{"bad env name", "env:\n  1X: y\n", 1, "env.1X", "not a valid"},
		{"bad host", "egress: [\"http://x.org/\"]\n", 1, "egress[0]", "not a host"},
		{"bad package", "image:\n  packages: [\"rm -rf\"]\n", 1, "image.packages[0]", "not a Debian package"},
		{"escaping manifest", "manifests: [../x]\n", 1, "manifests[0]", "inside the repository"},
		{"duplicate key", "test: a\ntest: b\n", 2, "test", "set twice"},
		{"not a mapping", "- a\n- b\n", 1, "", "must be a mapping"},
		{"two documents", "test: a\n---\ntest: b\n", 2, "", "more than one"},
		{"syntax", "test: [unclosed\n", 0, "", ""},
		{"image unknown", "image:\n  bse: x\n", 2, "image.bse", `did you mean "base"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse([]byte(c.yaml))
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("want *Error, got %v", err)
			}
			if c.line != 0 && e.Line != c.line {
				t.Errorf("line %d, want %d (%v)", e.Line, c.line, err)
			}
			if e.Field != c.field {
				t.Errorf("field %q, want %q (%v)", e.Field, c.field, err)
			}
			if !strings.Contains(e.Problem, c.in) {
				t.Errorf("problem %q lacks %q", e.Problem, c.in)
			}
			if !strings.HasPrefix(err.Error(), FileName) {
				t.Errorf("message %q does not name the file", err)
			}
		})
	}
}

func TestParseTooLarge(t *testing.T) {
	_, err := Parse([]byte("test: " + strings.Repeat("x", MaxFileBytes) + "\n"))
	if err == nil || !strings.Contains(err.Error(), "limit") {
		t.Fatalf("want a size error, got %v", err)
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{"", "test: x\n", "limits: {max_turns: 3}\n", "setup: |\n a\n"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		file, err := Parse(data)
		if err != nil {
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("error of type %T: %v", err, err)
			}
			return
		}
		if file == nil {
			t.Fatal("nil file without error")
		}
	})
}
