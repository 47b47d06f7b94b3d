package worker

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/wrenchworks/wrench/agent"
)

// TestFileHistoryIsKept: every version the agent's tools wrote reaches the
// task's artifacts (created, edited, deleted, binary), secrets redacted.
func TestFileHistoryIsKept(t *testing.T) {
	ag := &fakeAgent{reason: agent.StopFinished, history: map[string][]agent.FileVersion{
		"calc.go": {
			{Turn: 2, Tool: "edit", Before: []byte("return a - b // key=hunter22\n"), After: []byte("return a + b\n")},
			{Turn: 3, Tool: "edit", Before: []byte("return a + b\n"), After: []byte("return a + b // <ok> & done\n")},
		},
		"new.txt":  {{Turn: 2, Tool: "write", After: []byte("hello\n")}},
		"old.txt":  {{Turn: 4, Tool: "patch", Before: []byte("bye\n")}},
		"blob.bin": {{Turn: 4, Tool: "write", After: []byte{0xff, 0x00, 0xfe}}},
	}}
	w, err := New(Config{Sources: &fakeSources{}, Environments: &fakeEnvironments{}, Models: fakeModels(nil), Agent: ag,
		Secrets: []string{"hunter22"}})
	if err != nil {
		t.Fatal(err)
	}
	rep := w.Run(context.Background(), testTask(), 1, nil)
	if !slices.Contains(rep.Result.Artifacts, FileHistoryArtifact) {
		t.Fatalf("artifacts %v lack %s", rep.Result.Artifacts, FileHistoryArtifact)
	}
	raw := rep.Artifacts[FileHistoryArtifact]
	if bytes.Contains(raw, []byte("hunter22")) || !bytes.Contains(raw, []byte("<ok> & done")) {
		t.Errorf("secret kept or text escaped:\n%s", raw)
	}
	var lines []fileVersionLine
	sc := bufio.NewScanner(bytes.NewReader(raw))
	for sc.Scan() {
		var l fileVersionLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatal(err)
		}
		lines = append(lines, l)
	}
	var got []string
	for _, l := range lines {
		got = append(got, l.Path+"@"+l.Tool)
	}
	if want := "blob.bin@write calc.go@edit calc.go@edit new.txt@write old.txt@patch"; strings.Join(got, " ") != want {
		t.Fatalf("versions %q, want %q", got, want)
	}
	switch {
	case !lines[0].Base64 || *lines[0].After != "/wD+" || lines[0].Before != nil:
		t.Errorf("binary version %+v", lines[0])
	case lines[3].Before != nil || *lines[3].After != "hello\n":
		t.Errorf("created file %+v", lines[3])
	case lines[4].After != nil || *lines[4].Before != "bye\n":
		t.Errorf("deleted file %+v", lines[4])
	}
}

func TestFileHistoryIsBounded(t *testing.T) {
	big := bytes.Repeat([]byte("x"), maxFileHistory/2+1)
	raw := fileHistoryArtifact(map[string][]agent.FileVersion{"a": {{Turn: 1, Tool: "write", After: big}, {Turn: 2, Tool: "write", Before: big, After: big}}}, nil)
	if len(raw) > maxFileHistory+1024 || !bytes.Contains(raw, []byte(`"elided":true`)) {
		t.Errorf("%d bytes, elided marker present: %v", len(raw), bytes.Contains(raw, []byte(`"elided":true`)))
	}
}
