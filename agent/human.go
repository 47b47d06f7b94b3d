package agent

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
)

// HumanModel is the human mode: a person at a terminal plays the
// model. Each reply is one shell command typed on a line of In, run like
// the model's bash calls (tools protocol) or its one bash block (text
// protocol); Out shows the task and every observation. "exit", "submit" or
// the end of In ends the run: finish for the tools protocol, the
// completion command for the text protocol. A read in progress is not
// interrupted by ctx; it ends with the next line or the end of In. Do not
// give the same input to a PromptApprover: both buffer what they read.
type HumanModel struct {
	mu    sync.Mutex
	in    *bufio.Reader
	out   io.Writer
	calls int
}

// NewHumanModel returns a HumanModel reading commands from in and writing
// observations to out.
func NewHumanModel(in io.Reader, out io.Writer) *HumanModel {
	return &HumanModel{in: bufio.NewReader(in), out: out}
}

// Chat shows what happened since the previous reply and reads the next
// command.
func (h *HumanModel) Chat(ctx context.Context, req ModelRequest, _ func(StreamEvent)) (ModelResponse, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if err := ctx.Err(); err != nil {
		return ModelResponse{}, err
	}
	start := len(req.Messages)
	for start > 0 && req.Messages[start-1].Role != RoleAssistant {
		start--
	}
	for _, m := range req.Messages[start:] {
		if m.Role != RoleSystem {
			fmt.Fprintf(h.out, "\n%s\n", strings.TrimRight(m.Content, "\n"))
		}
	}
	var line string
	for line == "" {
		fmt.Fprint(h.out, "\nwrench$ ")
		l, err := h.in.ReadString('\n')
		if err := ctx.Err(); err != nil {
			return ModelResponse{}, err
		}
		line = strings.TrimSpace(l)
		if err != nil && line == "" {
			line = "exit"
		}
	}
	h.calls++
	tools := len(req.Tools) > 0
	if line == "exit" || line == "submit" {
		if !tools {
			return textReply("THOUGHT: the person ended the session.\n\n```bash\necho " + CompletionMarker + "\n```"), nil
		}
		return h.toolReply(ToolFinish, map[string]string{"summary": "Ended by the person at the terminal."}), nil
	}
	if !tools {
		return textReply("THOUGHT: typed by a person.\n\n```bash\n" + line + "\n```"), nil
	}
	if !slices.ContainsFunc(req.Tools, func(t ToolSpec) bool { return t.Name == ToolBash }) {
		return ModelResponse{}, &ModelError{Kind: ModelBadRequest, Err: fmt.Errorf("human mode needs the bash tool, which this run does not offer")}
	}
	return h.toolReply(ToolBash, map[string]string{"command": line}), nil
}

func (h *HumanModel) toolReply(name string, args map[string]string) ModelResponse {
	b, _ := json.Marshal(args)
	return ModelResponse{
		Message: Message{Role: RoleAssistant, ToolCalls: []ToolCall{{
			ID: fmt.Sprintf("human_%d", h.calls), Name: name, Arguments: string(b),
		}}},
		FinishReason: FinishToolCalls,
		Model:        "human",
	}
}

func textReply(content string) ModelResponse {
	return ModelResponse{Message: Message{Role: RoleAssistant, Content: content}, FinishReason: FinishStop, Model: "human"}
}
