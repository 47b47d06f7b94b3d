package scripted

import (
	"encoding/json"
	"os"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/wrenchworks/wrench/agent"
	"github.com/wrenchworks/wrench/task"
)

// docPath is the user documentation of the script format.
const docPath = "../../docs/scripted-model.md"

func readDoc(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(docPath)
	if err != nil {
		t.Fatalf("the scripted-model documentation is missing: %v", err)
	}
	return string(b)
}

// yamlBlocks returns the fenced yaml blocks of a Markdown text (fences of
// three or more backticks, so a block may hold a ``` bash fence).
func yamlBlocks(doc string) []string {
	re := regexp.MustCompile("(?ms)^(`{3,})yaml\n(.*?)^`{3,}\\s*$")
	var out []string
	for _, m := range re.FindAllStringSubmatch(doc, -1) {
		out = append(out, m[2])
	}
	return out
}

// TestDocExamplesParse checks that every YAML example in the documentation
// is a valid script.
func TestDocExamplesParse(t *testing.T) {
	blocks := yamlBlocks(readDoc(t))
	if len(blocks) < 5 {
		t.Fatalf("found %d yaml examples, want the format, step kinds, faults and full examples", len(blocks))
	}
	for i, b := range blocks {
		if _, err := Parse([]byte(b)); err != nil {
			t.Errorf("example %d does not parse: %v\n%s", i+1, err, b)
		}
	}
}

// TestDocNamesEveryKey checks that every key the parser accepts, every
// fault kind and every tool with its arguments is documented.
func TestDocNamesEveryKey(t *testing.T) {
	doc := readDoc(t)
	for _, typ := range []any{file{}, fileStep{}, fileToolCall{}, Usage{}, Fault{}} {
		rt := reflect.TypeOf(typ)
		for i := range rt.NumField() {
			key, _, _ := strings.Cut(rt.Field(i).Tag.Get("yaml"), ",")
			if key != "" && !strings.Contains(doc, "`"+key+"`") {
				t.Errorf("%s key %q is not documented", rt.Name(), key)
			}
		}
	}
	for _, k := range []FaultKind{FaultNoChoices, FaultCutStream, FaultGarbage, FaultBadJSONArgs, FaultMissingCallID} {
		if !strings.Contains(doc, "| `"+string(k)+"` |") {
			t.Errorf("fault kind %q is not documented", k)
		}
	}
	for _, allowed := range [][]string{nil, {agent.ToolResearch, agent.ToolSearch}} {
		specs, err := agent.Tools(task.ModeNormal, allowed)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range specs {
			row := regexp.MustCompile("(?m)^\\| `" + regexp.QuoteMeta(s.Name) + "`.*\\|(.*)\\|$").FindStringSubmatch(doc)
			if row == nil {
				t.Errorf("tool %s has no row in the tool table", s.Name)
				continue
			}
			var schema struct {
				Properties map[string]json.RawMessage `json:"properties"`
			}
			if err := json.Unmarshal(s.Parameters, &schema); err != nil {
				t.Fatal(err)
			}
			for arg := range schema.Properties {
				if !strings.Contains(row[1], "`"+arg+"`") {
					t.Errorf("tool %s: argument %q is not documented (row %q)", s.Name, arg, row[0])
				}
			}
		}
	}
}

// TestDocExampleIsTheShippedOne keeps the documented go-calc script equal
// to examples/go-calc/fix.yaml, so the page cannot drift from what `make
// demo` plays.
func TestDocExampleIsTheShippedOne(t *testing.T) {
	shipped, err := Load("../../examples/go-calc/fix.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range yamlBlocks(readDoc(t)) {
		if s, err := Parse([]byte(b)); err == nil && reflect.DeepEqual(s, shipped) {
			return
		}
	}
	t.Error("docs/scripted-model.md does not show examples/go-calc/fix.yaml as it is")
}
