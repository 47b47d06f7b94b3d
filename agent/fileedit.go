package agent

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
)

// Intent-to-action parsing: some models write their edits
// into the reply as
//
//	<file-edit filePath="src/main.ts">
//	------- SEARCH
//	...
//	+++++++ REPLACE
//	</file-edit>
//
// instead of calling a tool. A tools-protocol reply without tool calls that
// holds such blocks has them run as search_replace calls, in order, as if
// the model had made them (when search_replace is offered).

var fileEditPattern = regexp.MustCompile(`(?s)<file-edit\s+(?:filePath|path)="([^"]+)"\s*>\r?\n?(.*?)</file-edit>`)

// fileEditCalls turns the <file-edit> blocks of a reply into search_replace
// calls; turn and the block's position make their ids.
func fileEditCalls(content string, turn int) []ToolCall {
	var out []ToolCall
	for i, m := range fileEditPattern.FindAllStringSubmatch(content, -1) {
		diff := m[2]
		if strings.TrimSpace(diff) == "" {
			continue
		}
		args, _ := json.Marshal(map[string]string{"path": strings.TrimSpace(m[1]), "diff": diff})
		out = append(out, ToolCall{ID: fmt.Sprintf("file_edit_%d_%d", turn, i), Name: ToolSearchReplace, Arguments: string(args)})
	}
	return out
}
