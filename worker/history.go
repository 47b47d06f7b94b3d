package worker

import (
	"bytes"
	"encoding/json"
	"maps"
	"slices"
	"unicode/utf8"

	"github.com/wrenchworks/wrench/agent"
	"github.com/wrenchworks/wrench/task"
)

// FileHistoryArtifact is the artifact that keeps every version of every
// file the agent's tools wrote (agent.Outcome.FileHistory), one JSON line
// per write, in path order then write order.
const FileHistoryArtifact = "file_history.jsonl"

// maxFileHistory bounds the artifact; versions past it keep their path,
// turn and tool but not their content ("elided": true).
const maxFileHistory = 8 << 20

// fileVersionLine is one line of the file history artifact. Before and
// After are the file's text; binary content is base64 with Base64 set.
// A missing Before is a created file, a missing After a deleted one.
type fileVersionLine struct {
	Path   string  `json:"path"`
	Turn   int     `json:"turn"`
	Tool   string  `json:"tool"`
	Before *string `json:"before,omitempty"`
	After  *string `json:"after,omitempty"`
	Base64 bool    `json:"base64,omitempty"`
	Elided bool    `json:"elided,omitempty"`
}

// fileHistoryArtifact renders h as the file history artifact, secrets
// redacted from text; nil when the agent wrote nothing.
func fileHistoryArtifact(h map[string][]agent.FileVersion, secrets []string) []byte {
	if len(h) == 0 {
		return nil
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	for _, path := range slices.Sorted(maps.Keys(h)) {
		for _, v := range h[path] {
			line := fileVersionLine{Path: path, Turn: v.Turn, Tool: v.Tool}
			if buf.Len()+len(v.Before)+len(v.After) > maxFileHistory {
				line.Elided = true
			} else {
				text := utf8.Valid(v.Before) && utf8.Valid(v.After)
				line.Base64 = !text
				line.Before, line.After = content(v.Before, text, secrets), content(v.After, text, secrets)
			}
			_ = enc.Encode(line) // strings and ints always encode
		}
	}
	return buf.Bytes()
}

// content is one side of a version: nil stays nil (created or deleted).
func content(b []byte, text bool, secrets []string) *string {
	if b == nil {
		return nil
	}
	var s string
	if text {
		s = task.RedactSecrets(string(b), secrets)
	} else {
		enc, _ := json.Marshal(b) // base64, quoted
		s = string(enc[1 : len(enc)-1])
	}
	return &s
}
