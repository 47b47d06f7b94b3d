package scripted_test

import (
	"strings"
	"testing"
	"time"

	"github.com/wrenchworks/wrench/llm/scripted"
)

func TestParse_Valid(t *testing.T) {
	s, err := scripted.Parse([]byte(`
model: m1
final: "bye"
steps:
  - content: hello
    thinking: hmm
    tool_calls:
      - name: edit
        arguments: {path: "a<b>.go", old_string: "x", new_string: "y", n: 2, nested: {k: [1, 2]}}
      - name: bash
        id: call_x
        arguments: '{"command": "ls"'
      - name: finish
    expect_observation: "FAIL|ok"
    usage: {input_tokens: 10, output_tokens: 3}
    finish_reason: length
    fault: {status: 429, retry_after: 2}
  - fault: {delay: 150ms, times: 3}
  - fault: {kind: garbage}
`))
	if err != nil {
		t.Fatal(err)
	}
	if s.Model != "m1" || s.Final != "bye" || len(s.Steps) != 3 {
		t.Fatalf("script = %+v", s)
	}
	st := s.Steps[0]
	if got, want := st.ToolCalls[0].Arguments, `{"n":2,"nested":{"k":[1,2]},"new_string":"y","old_string":"x","path":"a<b>.go"}`; got != want {
		t.Errorf("map arguments = %s, want %s", got, want)
	}
	if got := st.ToolCalls[1]; got.Arguments != `{"command": "ls"` || got.ID != "call_x" {
		t.Errorf("raw arguments = %+v", got)
	}
	if got := st.ToolCalls[2].Arguments; got != "{}" {
		t.Errorf("absent arguments = %q, want {}", got)
	}
	if !st.Expect.MatchString("--- FAIL: x") || st.Usage.InputTokens != 10 || st.FinishReason != "length" {
		t.Errorf("step = %+v", st)
	}
	if f := st.Fault; f.Status != 429 || f.RetryAfter != "2" || f.Times != 1 {
		t.Errorf("fault = %+v", f)
	}
	if f := s.Steps[1].Fault; f.Delay != 150*time.Millisecond || f.Times != 3 {
		t.Errorf("delay fault = %+v", f)
	}
}

func TestParse_Defaults(t *testing.T) {
	s, err := scripted.Parse([]byte("steps: []\n"))
	if err != nil {
		t.Fatal(err)
	}
	if s.Final != scripted.DefaultFinal || s.Model != "" {
		t.Errorf("defaults = %+v", s)
	}
}

func TestParse_Errors(t *testing.T) {
	tests := []struct {
		name, yaml, want string
	}{
		{"empty", "", "empty document"},
		{"unknown field", "steps:\n  - contnet: x\n", "contnet"},
		{"bad regexp", "steps:\n  - expect_observation: '('\n", "expect_observation"},
		{"list arguments", "steps:\n  - tool_calls: [{name: a, arguments: [1]}]\n", "map or a string"},
		{"number arguments", "steps:\n  - tool_calls: [{name: a, arguments: 3}]\n", "map or a string"},
		{"no tool name", "steps:\n  - tool_calls: [{arguments: {}}]\n", "name is required"},
		{"status and kind", "steps:\n  - fault: {status: 500, kind: garbage}\n", "exclusive"},
		{"status range", "steps:\n  - fault: {status: 200}\n", "not an HTTP error"},
		{"unknown kind", "steps:\n  - fault: {kind: explode}\n", "unknown kind"},
		{"kind needs calls", "steps:\n  - fault: {kind: bad_json_args}\n", "needs tool_calls"},
		{"empty fault", "steps:\n  - fault: {times: 2}\n", "needs a status"},
		{"negative times", "steps:\n  - fault: {status: 500, times: -1}\n", "negative"},
		{"retry_after alone", "steps:\n  - fault: {kind: garbage, retry_after: 1}\n", "needs a status"},
		{"step number", "steps:\n  - content: ok\n  - fault: {kind: nope}\n", "step 2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := scripted.Parse([]byte(tt.yaml))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want it to mention %q", err, tt.want)
			}
		})
	}
}

func TestLoad(t *testing.T) {
	for _, f := range []string{"fix_add.yaml", "faults.yaml", "raw_args.yaml"} {
		if _, err := scripted.Load("testdata/" + f); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
	if _, err := scripted.Load("testdata/missing.yaml"); err == nil {
		t.Error("missing file: no error")
	}
}
