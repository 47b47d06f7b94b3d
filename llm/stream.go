package llm

import (
	"errors"
	"slices"
	"strings"

	"github.com/openai/openai-go/v3"

	"github.com/wrenchworks/wrench/agent"
)

// accumulator builds a reply from stream chunks and passes deltas on.
type accumulator struct {
	onDelta func(agent.StreamEvent)
	// emitted: at least one delta reached onDelta.
	emitted bool
	// max bounds size, the bytes of text, reasoning, names, ids and
	// arguments so far; err is set once it is passed.
	max, size int64
	err       error

	model     string
	content   strings.Builder
	thinking  strings.Builder
	calls     map[int64]*callAcc
	finish    string
	sawChoice bool
	usage     agent.TokenUsage
}

type callAcc struct {
	index    int64
	id, name string
	args     strings.Builder
}

func newAccumulator(onDelta func(agent.StreamEvent), max int64) *accumulator {
	return &accumulator{onDelta: onDelta, calls: map[int64]*callAcc{}, max: max}
}

// grow counts n more bytes of the reply and reports whether they fit.
func (a *accumulator) grow(n int) bool {
	a.size += int64(n)
	if a.size > a.max && a.err == nil {
		a.err = &replyTooLargeError{what: "its text, reasoning and tool calls", limit: a.max}
	}
	return a.err == nil
}

func (a *accumulator) emit(ev agent.StreamEvent) {
	if a.onDelta != nil {
		a.emitted = true
		a.onDelta(ev)
	}
}

// add folds one chunk in. Only choice 0 is read (the client asks for one).
// Once the reply passes its cap, add keeps nothing more and a.err says so.
func (a *accumulator) add(ch openai.ChatCompletionChunk) {
	if ch.Model != "" {
		a.model = ch.Model
	}
	if ch.JSON.Usage.Valid() {
		a.usage = usageOf(ch.Usage)
	}
	for _, choice := range ch.Choices {
		if choice.Index != 0 {
			continue
		}
		a.sawChoice = true
		d := choice.Delta
		if !a.grow(len(d.Content) + len(d.Refusal) + deltaCallBytes(d.ToolCalls)) {
			return
		}
		if t := reasoningText(d.JSON.ExtraFields); t != "" {
			if !a.grow(len(t)) {
				return
			}
			a.thinking.WriteString(t)
			a.emit(agent.StreamEvent{Kind: agent.StreamThinking, Text: t})
		}
		text := d.Content
		if text == "" {
			text = d.Refusal
		}
		if text != "" {
			a.content.WriteString(text)
			a.emit(agent.StreamEvent{Kind: agent.StreamText, Text: text})
		}
		for _, tc := range d.ToolCalls {
			a.addCall(tc)
		}
		if choice.FinishReason != "" {
			a.finish = choice.FinishReason
		}
	}
}

func (a *accumulator) addCall(tc openai.ChatCompletionChunkChoiceDeltaToolCall) {
	c, ok := a.calls[tc.Index]
	if !ok {
		c = &callAcc{index: tc.Index, id: tc.ID, name: tc.Function.Name}
		a.calls[tc.Index] = c
		a.emit(agent.StreamEvent{Kind: agent.StreamToolCallStart, Index: int(tc.Index), ID: c.id, Name: c.name})
	} else {
		if c.id == "" {
			c.id = tc.ID
		}
		if c.name == "" {
			c.name = tc.Function.Name
		}
	}
	if args := tc.Function.Arguments; args != "" {
		c.args.WriteString(args)
		a.emit(agent.StreamEvent{Kind: agent.StreamToolCallArgs, Index: int(tc.Index), ID: c.id, Name: c.name, Text: args})
	}
}

// deltaCallBytes is what the tool-call deltas of one chunk add.
func deltaCallBytes(calls []openai.ChatCompletionChunkChoiceDeltaToolCall) int {
	n := 0
	for _, tc := range calls {
		n += len(tc.ID) + len(tc.Function.Name) + len(tc.Function.Arguments)
	}
	return n
}

// result is the complete reply, or why the stream does not make one.
func (a *accumulator) result(generateIDs bool) (agent.ModelResponse, error) {
	if a.err != nil {
		return agent.ModelResponse{}, a.err
	}
	if !a.sawChoice {
		return agent.ModelResponse{}, errors.New("the streamed reply has no choices")
	}
	if a.finish == "" {
		return agent.ModelResponse{}, errors.New("the stream ended without a finish reason (cut mid-way)")
	}
	msg := agent.Message{Role: agent.RoleAssistant, Content: a.content.String(), Thinking: a.thinking.String()}
	idx := make([]int64, 0, len(a.calls))
	for i := range a.calls {
		idx = append(idx, i)
	}
	slices.Sort(idx)
	for _, i := range idx {
		c := a.calls[i]
		msg.ToolCalls = append(msg.ToolCalls, agent.ToolCall{ID: c.id, Name: c.name, Arguments: c.args.String()})
		a.emit(agent.StreamEvent{Kind: agent.StreamToolCallEnd, Index: int(i), ID: c.id, Name: c.name})
	}
	if err := checkCallIDs(msg.ToolCalls, generateIDs); err != nil {
		return agent.ModelResponse{}, err
	}
	return agent.ModelResponse{
		Message:      msg,
		FinishReason: finishReason(a.finish),
		Usage:        a.usage,
		Model:        a.model,
	}, nil
}
