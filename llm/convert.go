package llm

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/packages/param"
	"github.com/openai/openai-go/v3/packages/respjson"
	"github.com/openai/openai-go/v3/shared"

	"github.com/wrenchworks/wrench/agent"
)

// params converts an agent request into chat completions parameters.
func (c *Client) params(model string, req agent.ModelRequest) (openai.ChatCompletionNewParams, error) {
	if model == "" {
		return openai.ChatCompletionNewParams{}, errors.New("no model named")
	}
	p := openai.ChatCompletionNewParams{Model: shared.ChatModel(model)}
	for i, m := range req.Messages {
		mp, err := messageParam(m)
		if err != nil {
			return openai.ChatCompletionNewParams{}, fmt.Errorf("message %d: %w", i, err)
		}
		p.Messages = append(p.Messages, mp)
	}
	for _, t := range req.Tools {
		fd := shared.FunctionDefinitionParam{Name: t.Name}
		if t.Description != "" {
			fd.Description = param.NewOpt(t.Description)
		}
		if len(t.Parameters) > 0 {
			var schema map[string]any
			if err := json.Unmarshal(t.Parameters, &schema); err != nil {
				return openai.ChatCompletionNewParams{}, fmt.Errorf("tool %s: parameters: %w", t.Name, err)
			}
			fd.Parameters = schema
		}
		p.Tools = append(p.Tools, openai.ChatCompletionFunctionTool(fd))
	}
	if req.MaxTokens > 0 {
		if c.cfg.LegacyMaxTokens {
			p.MaxTokens = param.NewOpt(int64(req.MaxTokens))
		} else {
			p.MaxCompletionTokens = param.NewOpt(int64(req.MaxTokens))
		}
	}
	if req.Temperature != nil {
		p.Temperature = param.NewOpt(*req.Temperature)
	}
	if !c.cfg.NoStream {
		p.StreamOptions.IncludeUsage = param.NewOpt(true)
	}
	return p, nil
}

func messageParam(m agent.Message) (openai.ChatCompletionMessageParamUnion, error) {
	switch m.Role {
	case agent.RoleSystem:
		return openai.SystemMessage(m.Content), nil
	case agent.RoleUser:
		return openai.UserMessage(m.Content), nil
	case agent.RoleTool:
		if m.ToolCallID == "" {
			return openai.ChatCompletionMessageParamUnion{}, errors.New("tool message without a tool call id")
		}
		return openai.ToolMessage(m.Content, m.ToolCallID), nil
	case agent.RoleAssistant:
		var a openai.ChatCompletionAssistantMessageParam
		if m.Content != "" || len(m.ToolCalls) == 0 {
			a.Content.OfString = param.NewOpt(m.Content)
		}
		for _, tc := range m.ToolCalls {
			args := tc.Arguments
			if !json.Valid([]byte(args)) {
				// The model's malformed arguments were answered with an
				// error observation; some endpoints reject them verbatim.
				args = "{}"
			}
			a.ToolCalls = append(a.ToolCalls, openai.ChatCompletionMessageToolCallUnionParam{
				OfFunction: &openai.ChatCompletionMessageFunctionToolCallParam{
					ID:       tc.ID,
					Function: openai.ChatCompletionMessageFunctionToolCallFunctionParam{Name: tc.Name, Arguments: args},
				},
			})
		}
		return openai.ChatCompletionMessageParamUnion{OfAssistant: &a}, nil
	}
	return openai.ChatCompletionMessageParamUnion{}, fmt.Errorf("unknown role %q", m.Role)
}

// fromCompletion converts a whole (non-streamed) reply.
func (c *Client) fromCompletion(cc *openai.ChatCompletion) (agent.ModelResponse, error) {
	if cc == nil || len(cc.Choices) == 0 {
		return agent.ModelResponse{}, errors.New("the reply has no choices")
	}
	ch := cc.Choices[0]
	msg := agent.Message{
		Role:     agent.RoleAssistant,
		Content:  ch.Message.Content,
		Thinking: reasoningText(ch.Message.JSON.ExtraFields),
	}
	if msg.Content == "" && ch.Message.Refusal != "" {
		msg.Content = ch.Message.Refusal
	}
	for _, tc := range ch.Message.ToolCalls {
		call := agent.ToolCall{ID: tc.ID, Name: tc.Function.Name, Arguments: tc.Function.Arguments}
		if tc.Type == "custom" {
			call.Name, call.Arguments = tc.Custom.Name, tc.Custom.Input
		}
		msg.ToolCalls = append(msg.ToolCalls, call)
	}
	if err := checkCallIDs(msg.ToolCalls, c.cfg.GenerateMissingCallIDs); err != nil {
		return agent.ModelResponse{}, err
	}
	finish := finishReason(ch.FinishReason)
	if ch.FinishReason == "" {
		finish = agent.FinishStop
		if len(msg.ToolCalls) > 0 {
			finish = agent.FinishToolCalls
		}
	}
	return agent.ModelResponse{
		Message:      msg,
		FinishReason: finish,
		Usage:        usageOf(cc.Usage),
		Model:        cc.Model,
	}, nil
}

// checkCallIDs fails on a tool call without an id, or gives it one.
func checkCallIDs(calls []agent.ToolCall, generate bool) error {
	for i := range calls {
		if calls[i].ID != "" {
			continue
		}
		if !generate {
			return fmt.Errorf("tool call %d (%q) has no id", i, calls[i].Name)
		}
		calls[i].ID = newCallID()
	}
	return nil
}

func newCallID() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return "call_wrench_" + hex.EncodeToString(b)
}

// reasoningText reads the reasoning an endpoint sent outside the standard
// fields: "reasoning_content" (DeepSeek, vLLM, many others) or "reasoning".
func reasoningText(extra map[string]respjson.Field) string {
	for _, k := range []string{"reasoning_content", "reasoning"} {
		f, ok := extra[k]
		if !ok {
			continue
		}
		var s string
		if json.Unmarshal([]byte(f.Raw()), &s) == nil && s != "" {
			return s
		}
	}
	return ""
}

func finishReason(s string) agent.FinishReason {
	switch s {
	case "stop":
		return agent.FinishStop
	case "tool_calls", "function_call":
		return agent.FinishToolCalls
	case "length":
		return agent.FinishLength
	case "content_filter":
		return agent.FinishContentFilter
	}
	return agent.FinishOther
}

func usageOf(u openai.CompletionUsage) agent.TokenUsage {
	return agent.TokenUsage{
		InputTokens:  u.PromptTokens,
		OutputTokens: u.CompletionTokens,
		CachedTokens: u.PromptTokensDetails.CachedTokens,
	}
}
