package testout

import (
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/wrenchworks/wrench/task"
)

const (
	pass = task.TestPassed
	fail = task.TestFailed
	skip = task.TestSkipped
	errd = task.TestError
)

// The testdata files are real output: tests that pass, fail, skip, have
// subtests (Go) or parameters with spaces and " - " in their ids (pytest),
// one package that does not build, captured from Go 1.19 (Debian's, in the
// sandbox image), Go 1.26 and pytest 7.2.
func TestParse(t *testing.T) {
	goWant := Outcomes{"TestPass": pass, "TestFail": fail, "TestSkip": skip, "TestSub": fail,
		"TestSub/one_ok": pass, "TestSub/two": fail, "TestOther": pass}
	pyWant := Outcomes{
		"tests/test_x.py::test_pass": pass, "tests/test_x.py::test_fail": fail,
		"tests/test_x.py::test_xfail": pass, "tests/test_x.py::test_error": errd,
		"tests/test_x.py::TestK::test_param[1]": fail, "tests/test_x.py::TestK::test_param[a b]": pass,
		"tests/test_x.py::TestK::test_param[x - y]": pass,
	}
	junitWant := Outcomes{}
	for k, v := range pyWant {
		junitWant[k] = v
	}
	junitWant["tests/test_x.py::test_skip"] = skip // JUnit names skipped tests; -rA does not
	cases := []struct {
		file   string
		format Format
		want   Outcomes
	}{
		{"go-json.txt", GoJSON, goWant},
		{"go126-json.txt", GoJSON, goWant},
		{"go-v.txt", GoVerbose, goWant},
		{"pytest-ra.txt", PytestRA, pyWant},
		{"pytest-junit.xml", JUnitXML, junitWant},
	}
	for _, c := range cases {
		t.Run(c.file, func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join("testdata", c.file))
			if err != nil {
				t.Fatal(err)
			}
			got, err := Parse(c.format, data)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, c.want) {
				t.Errorf("Parse(%s):\n got %v\nwant %v", c.format, got, c.want)
			}
		})
	}
}

func TestParseHostile(t *testing.T) {
	huge := strings.Repeat("x", 2*maxLine)
	cases := []struct {
		name   string
		format Format
		in     string
		want   Outcomes
	}{
		{"json garbage and plain lines", GoJSON, "{not json\nok  \tpkg\n{\"Action\":\"pass\"}\n{\"Action\":\"pass\",\"Test\":\"TestA\"}\n", Outcomes{"TestA": pass}},
		{"same name twice, worse wins", GoJSON, `{"Action":"pass","Test":"TestA"}` + "\n" + `{"Action":"fail","Test":"TestA"}` + "\n" + `{"Action":"pass","Test":"TestA"}`, Outcomes{"TestA": fail}},
		{"pytest words without ids", PytestRA, "PASSED\nFAILED something\nSKIPPED [1] t.py:3: x\nPASSED t.py::a\n", Outcomes{"t.py::a": pass}},
		{"line beyond the limit is skipped", GoVerbose, "--- PASS: TestA (0.00s)\n" + huge + "\n--- PASS: TestB (0.00s)\r\n", Outcomes{"TestA": pass, "TestB": pass}},
		{"empty", PytestRA, "", Outcomes{}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := Parse(c.format, []byte(c.in))
			if err != nil || !reflect.DeepEqual(got, c.want) {
				t.Errorf("got %v, %v; want %v", got, err, c.want)
			}
		})
	}
	if _, err := Parse(JUnitXML, []byte("<testsuite><testcase name='a'>")); err == nil {
		t.Error("truncated XML: no error")
	}
	if _, err := Parse("tap", nil); err == nil {
		t.Error("unknown format: no error")
	}
}

func TestLookup(t *testing.T) {
	o := Outcomes{"a": pass, "b": fail}
	got := o.Lookup([]string{"b", "zz", "a"})
	want := []task.TestOutcome{{Name: "b", Status: fail}, {Name: "zz", Status: task.TestMissing}, {Name: "a", Status: pass}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Lookup = %v", got)
	}
	if l := o.List(); len(l) != 2 || l[0].Name != "a" {
		t.Errorf("List = %v", l)
	}
}

func TestCommand(t *testing.T) {
	cases := []struct {
		name, fw     string
		files, names []string
		want         string
	}{
		{"go root and sub packages, testdata", task.FrameworkGo, []string{"a_test.go", "internal/x/y_test.go", "internal/x/testdata/in/case.txt"}, nil,
			"go test -json -count=1 './.' './internal/x'"},
		{"go run pattern from top-level names", task.FrameworkGo, []string{"a_test.go"}, []string{"TestB/sub case", "TestA", "TestB", "Test.Odd"},
			`go test -json -count=1 -run '^(TestA|TestB|Test\.Odd)$' './.'`},
		{"pytest modules", task.FrameworkPytest, []string{"tests/test_a.py", "tests/conftest.py", "src/pkg/x.py", "tests/it's_test.py"}, []string{"ignored"},
			`python3 -m pytest -rA -p no:cacheprovider --tb=short 'tests/it'\''s_test.py' 'tests/test_a.py'`},
		{"pytest directories when no test module", task.FrameworkPytest, []string{"tests/conftest.py", "tests/data/x.json"}, nil,
			`python3 -m pytest -rA -p no:cacheprovider --tb=short 'tests' 'tests/data'`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := Command(c.fw, c.files, c.names)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.HasSuffix(got, c.want) {
				t.Errorf("Command =\n %s\nwant suffix\n %s", got, c.want)
			}
		})
	}
	for _, bad := range []struct{ fw, file string }{{task.FrameworkGo, "README.md"}, {"rspec", "a_test.go"}} {
		if _, err := Command(bad.fw, []string{bad.file}, nil); err == nil {
			t.Errorf("Command(%s, %s): no error", bad.fw, bad.file)
		}
	}
}

// TestGoCommandRuns runs the Go command on a real module and reads its
// output back: the -run pattern selects the named tests and no others.
func TestGoCommandRuns(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go on PATH")
	}
	dir := t.TempDir()
	write := func(name, body string) {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("go.mod", "module example.com/m\n\ngo 1.19\n")
	write("a_test.go", "package m\nimport \"testing\"\nfunc TestA(t *testing.T) { t.Run(\"x y\", func(*testing.T) {}) }\nfunc TestB(t *testing.T) { t.Fail() }\nfunc TestC(t *testing.T) {}\n")
	write("sub/b_test.go", "package sub\nimport \"testing\"\nfunc TestA(t *testing.T) {}\n")
	cmdline, err := Command(task.FrameworkGo, []string{"a_test.go", "sub/b_test.go"}, []string{"TestA/x_y", "TestB"})
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("bash", "-c", cmdline)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOTOOLCHAIN=local")
	out, _ := cmd.CombinedOutput()
	got, _ := Parse(GoJSON, out)
	want := Outcomes{"TestA": pass, "TestA/x_y": pass, "TestB": fail}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("ran %s:\n got %v\nwant %v\n%s", cmdline, got, want, out)
	}
}
