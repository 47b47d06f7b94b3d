package testout

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"path"
	"regexp"
	"strings"
	"unicode"

	"github.com/wrenchworks/wrench/task"
)

// maxLine bounds one line of test output; a longer line is skipped and
// the lines after it still count.
const maxLine = 1 << 20

func lines(output []byte, fn func(line string)) {
	for len(output) > 0 {
		l := output
		if i := bytes.IndexByte(output, '\n'); i >= 0 {
			l, output = output[:i], output[i+1:]
		} else {
			output = nil
		}
		if len(l) <= maxLine {
			fn(strings.TrimSuffix(string(l), "\r"))
		}
	}
}

// goEvent is the part of a test2json event the parser reads.
type goEvent struct {
	Action string
	Test   string
}

func parseGoJSON(output []byte) Outcomes {
	o := Outcomes{}
	lines(output, func(l string) {
		if !strings.HasPrefix(l, "{") {
			return
		}
		var ev goEvent
		if json.Unmarshal([]byte(l), &ev) != nil || ev.Test == "" {
			return
		}
		switch ev.Action {
		case "pass":
			o.set(ev.Test, task.TestPassed)
		case "fail":
			o.set(ev.Test, task.TestFailed)
		case "skip":
			o.set(ev.Test, task.TestSkipped)
		}
	})
	return o
}

// goResult matches the result line of a test in `go test -v` output,
// subtests indented.
var goResult = regexp.MustCompile(`^\s*--- (PASS|FAIL|SKIP): (\S+) \(`)

func parseGoVerbose(output []byte) Outcomes {
	o := Outcomes{}
	lines(output, func(l string) {
		m := goResult.FindStringSubmatch(l)
		if m == nil {
			return
		}
		switch m[1] {
		case "PASS":
			o.set(m[2], task.TestPassed)
		case "FAIL":
			o.set(m[2], task.TestFailed)
		case "SKIP":
			o.set(m[2], task.TestSkipped)
		}
	})
	return o
}

// pytestStatus maps the words of pytest's short test summary to outcomes:
// an expected failure counts as passing, as SWE-bench's harness counts it.
var pytestStatus = map[string]task.TestStatus{
	"PASSED": task.TestPassed,
	"XFAIL":  task.TestPassed,
	"XPASS":  task.TestPassed,
	"FAILED": task.TestFailed,
	"ERROR":  task.TestError,
}

func parsePytestRA(output []byte) Outcomes {
	o := Outcomes{}
	lines(output, func(l string) {
		word, rest, ok := strings.Cut(l, " ")
		st, known := pytestStatus[word]
		if !ok || !known || !strings.Contains(rest, "::") {
			return
		}
		o.set(pytestNodeID(rest), st)
	})
	return o
}

// pytestNodeID cuts the " - message" off a summary line's rest. A " - "
// inside a parameter id's brackets belongs to the id.
func pytestNodeID(rest string) string {
	depth := 0
	for i := 0; i < len(rest); i++ {
		switch rest[i] {
		case '[':
			depth++
		case ']':
			if depth > 0 {
				depth--
			}
		case ' ':
			if depth == 0 && strings.HasPrefix(rest[i:], " - ") {
				return rest[:i]
			}
		}
	}
	return strings.TrimRight(rest, " ")
}

// junitCase is one <testcase>.
type junitCase struct {
	Classname string    `xml:"classname,attr"`
	Name      string    `xml:"name,attr"`
	File      string    `xml:"file,attr"`
	Failure   *struct{} `xml:"failure"`
	Error     *struct{} `xml:"error"`
	Skipped   *struct {
		Type string `xml:"type,attr"`
	} `xml:"skipped"`
}

func parseJUnit(output []byte) (Outcomes, error) {
	o := Outcomes{}
	dec := xml.NewDecoder(bytes.NewReader(output))
	for {
		tok, err := dec.Token()
		if err != nil {
			if errors.Is(err, io.EOF) {
				return o, nil
			}
			return o, fmt.Errorf("testout: junit xml: %w", err)
		}
		se, ok := tok.(xml.StartElement)
		if !ok || se.Name.Local != "testcase" {
			continue
		}
		var c junitCase
		if err := dec.DecodeElement(&c, &se); err != nil {
			return o, fmt.Errorf("testout: junit xml: %w", err)
		}
		st := task.TestPassed
		switch {
		case c.Error != nil:
			st = task.TestError
		case c.Failure != nil:
			st = task.TestFailed
		case c.Skipped != nil && c.Skipped.Type == "pytest.xfail":
			st = task.TestPassed
		case c.Skipped != nil:
			st = task.TestSkipped
		}
		o.set(junitName(c), st)
	}
}

// junitName turns a test case into the name the other formats use: a
// pytest node id when the classname is a dotted Python module path
// (tests.test_x.TestK + test_a -> tests/test_x.py::TestK::test_a; the
// first part that starts with a capital letter is the first class), the
// bare test name for Go (go-junit-report puts the package in classname;
// Go test names start with a capital letter, pytest's with "test").
func junitName(c junitCase) string {
	if c.Classname == "" || strings.Contains(c.Classname, "/") || startsUpper(c.Name) {
		return c.Name
	}
	parts := strings.Split(c.Classname, ".")
	i := 0
	for i < len(parts) && !startsUpper(parts[i]) {
		i++
	}
	module := path.Join(parts[:i]...) + ".py"
	if c.File != "" {
		module = c.File
	}
	if i == 0 && c.File == "" {
		return c.Name
	}
	return strings.Join(append(append([]string{module}, parts[i:]...), c.Name), "::")
}

func startsUpper(s string) bool {
	for _, r := range s {
		return unicode.IsUpper(r)
	}
	return false
}
