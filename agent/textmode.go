package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/wrenchworks/wrench/sandbox"
	"github.com/wrenchworks/wrench/task"
)

// textAction is mini-swe-agent's v1 action rule: a ```bash fence, lazily up
// to the first newline followed by ```.
var textAction = regexp.MustCompile("(?s)```bash\\s*\\n(.*?)\\n```")

// ParseTextActions returns every bash block in a text-protocol reply, each
// stripped of surrounding whitespace. A valid reply has exactly one.
func ParseTextActions(content string) []string {
	ms := textAction.FindAllStringSubmatch(content, -1)
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = strings.TrimSpace(m[1])
	}
	return out
}

// TextCompletion reports whether a command's output submits the task: its
// first line (after leading whitespace) is CompletionMarker and the command
// succeeded. final is everything after that line.
func TextCompletion(output string, exitCode int) (final string, ok bool) {
	if exitCode != 0 {
		return "", false
	}
	rest := strings.TrimLeft(output, " \t\r\n")
	first, after, _ := strings.Cut(rest, "\n")
	if strings.TrimSpace(first) != CompletionMarker {
		return "", false
	}
	return after, true
}

// textFormatError is the feedback for a reply without exactly one action.
func textFormatError(found int) string {
	return fmt.Sprintf("Please always provide EXACTLY ONE action in triple backticks, found %d actions.\n\n"+
		"Format your response like this:\n\nTHOUGHT: your reasoning\n\n```bash\nyour_command_here\n```\n\n"+
		"If you want to end the task, issue the command:\n\n```bash\necho %s && git add -A && git diff --cached\n```\n\n"+
		"and nothing else in that reply.", found, CompletionMarker)
}

// TextObservation renders a command result as the text protocol's
// observation: <returncode> and <output>, or, when the output is longer
// than maxChars, a warning with its head and tail.
func TextObservation(res sandbox.ExecResult, timeout time.Duration, maxChars int) string {
	out := string(res.Output)
	var b strings.Builder
	if res.TimedOut {
		fmt.Fprintf(&b, "<warning>The command timed out after %s and was killed. Use a quicker command, or run it in the background with a shorter timeout.</warning>\n", timeout)
	}
	fmt.Fprintf(&b, "<returncode>%d</returncode>\n", res.ExitCode)
	head, tail, dropped := truncateMiddle(out, maxChars)
	if dropped == 0 && res.Dropped == 0 {
		b.WriteString("<output>\n")
		b.WriteString(out)
		b.WriteString("</output>")
		return b.String()
	}
	if dropped == 0 {
		head, tail = out, ""
	}
	b.WriteString("<warning>\nThe output of your last command was too long. Try a command that produces less output: use head, tail or sed -n to see part of a file, a more selective grep or find pattern, or redirect the output to a file and search in it.\n</warning>\n")
	fmt.Fprintf(&b, "<output_head>\n%s\n</output_head>\n<elided_chars>\n%d characters elided\n</elided_chars>\n<output_tail>\n%s\n</output_tail>", head, int64(dropped)+res.Dropped, tail)
	return b.String()
}

// textTurn acts on a text-protocol reply: exactly one bash block is run and
// its observation sent back; anything else is a format error.
func (s *runState) textTurn(parent, ctx context.Context, resp ModelResponse) *ending {
	msg := resp.Message
	msg.Role = RoleAssistant
	msg.ToolCalls = nil // the text protocol has no native calls
	s.appendMsg(msg)
	actions := ParseTextActions(msg.Content)
	if len(actions) != 1 {
		s.formatErrs++
		s.appendMsg(Message{Role: RoleUser, Content: textFormatError(len(actions))})
		return nil
	}
	s.formatErrs = 0
	argText, _ := json.Marshal(map[string]string{"command": actions[0]})
	call := ToolCall{ID: fmt.Sprintf("text_%d", s.turn), Name: ToolBash, Arguments: string(argText)}
	res := s.runCall(ctx, call, actions[0])
	switch {
	case res.fatal != nil:
		s.appendMsg(Message{Role: RoleUser, Content: "The command was interrupted."})
		return s.stopFor(parent, res.fatal)
	case res.denied:
		s.appendMsg(Message{Role: RoleUser, Content: res.output})
		s.emit(task.Event{Kind: task.EventToolResult, Tool: ToolBash, Text: res.output, IsError: true})
		return &ending{reason: StopDenied, err: res.deniedErr}
	}
	if res.exec == nil { // an argument problem; cannot happen with a parsed block
		s.appendMsg(Message{Role: RoleUser, Content: res.output})
		return nil
	}
	obs := TextObservation(*res.exec, s.a.cfg.CommandTimeout, s.a.cfg.MaxOutputChars)
	if final, ok := TextCompletion(string(res.exec.Output), res.exec.ExitCode); ok {
		fr := toolResult{output: "Finished.", finish: true, summary: final}
		var notes []string
		if e := s.onFinish(parent, ctx, &fr, &notes); e != nil {
			s.emit(task.Event{Kind: task.EventToolResult, Tool: ToolBash, Text: eventText(obs)})
			return e
		}
		s.appendMsg(Message{Role: RoleUser, Content: joinNotes(fr.output, notes)})
		s.emit(task.Event{Kind: task.EventToolResult, Tool: ToolBash, Text: eventText(fr.output), IsError: true})
		return nil
	}
	if res.isError {
		obs += fmt.Sprintf("\n<error_class>%s</error_class>", ClassifyError(string(res.exec.Output), res.exec.ExitCode, res.exec.TimedOut))
	}
	notes, stop := s.afterCall(parent, ctx, call, &res)
	s.appendMsg(Message{Role: RoleUser, Content: joinNotes(obs, notes)})
	s.emit(task.Event{Kind: task.EventToolResult, Tool: ToolBash, Text: eventText(obs), IsError: res.isError})
	return stop
}
