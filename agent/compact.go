package agent

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/wrenchworks/wrench/task"
)

// Compaction: when the
// history nears Threshold of the model's context window, old tool outputs
// are elided first; if that is not enough, the turns before the last
// KeepTurns are summarised by a model call into one summary message. The
// system prompt and the task stay. Summaries are rate-limited (MaxPerRun,
// MinTurnsBetween) so compaction cannot spiral; a history that still does
// not fit ends the run with context_window.

const (
	elideMinChars     = 300
	transcriptPerItem = 2000
	charsPerToken     = 4
)

// estimateTokens guesses the tokens of messages: about four characters a
// token plus a little per message.
func estimateTokens(msgs []Message) int64 {
	var n int64
	for i := range msgs {
		m := &msgs[i]
		c := len(m.Content) + len(m.Thinking)
		for _, tc := range m.ToolCalls {
			c += len(tc.Name) + len(tc.Arguments) + 8
		}
		n += int64(c/charsPerToken) + 4
	}
	return n
}

// historyTokens is the best estimate of the next request's input: what the
// last call reported plus an estimate of what was added since.
func (s *runState) historyTokens() int64 {
	if s.lastInputAt > 0 && s.lastInputAt <= len(s.msgs) && s.lastInput > 0 {
		return s.lastInput + estimateTokens(s.msgs[s.lastInputAt:])
	}
	return estimateTokens(s.msgs)
}

// keepFrom is the index of the first message of the last KeepTurns turns
// (a turn starts at an assistant message).
func (s *runState) keepFrom() int {
	k := s.a.cfg.Compaction.KeepTurns
	for i := len(s.msgs) - 1; i >= s.pinned; i-- {
		if s.msgs[i].Role == RoleAssistant {
			k--
			if k == 0 {
				return i
			}
		}
	}
	return s.pinned
}

// maybeCompact keeps the history within the context window.
func (s *runState) maybeCompact(parent, ctx context.Context) *ending {
	cc := s.a.cfg.Compaction
	if cc.Disabled {
		return nil
	}
	window := int64(s.window)
	threshold := int64(float64(window) * cc.Threshold)
	est := s.historyTokens()
	if est < threshold {
		return nil
	}
	if s.elideOldOutputs() {
		s.lastInputAt = 0
		if est = s.historyTokens(); est < threshold {
			return nil
		}
	}
	if s.compactTries < cc.MaxPerRun && (s.compactTries == 0 || s.turn-s.lastCompactTurn >= cc.MinTurnsBetween) {
		// Attempts count, failed ones too: a summary that keeps failing
		// must not cost a model call every turn.
		s.compactTries++
		s.lastCompactTurn = s.turn
		err := s.summarise(ctx)
		switch {
		case err == nil:
			if est = s.historyTokens(); est < window {
				return nil
			}
		case ctx.Err() != nil:
			return s.stopFor(parent, ctx.Err())
		case errors.Is(err, task.ErrOverBudget):
			return s.stopFor(parent, err)
		default:
			s.logEvent("compaction failed: %v", err)
		}
	}
	if est >= window {
		return &ending{reason: StopContextWindow, err: fmt.Errorf("history of about %d tokens does not fit the %d-token context window", est, window)}
	}
	return nil
}

// elideOldOutputs replaces long tool outputs (and text-mode observations)
// older than the kept turns with a marker; it reports whether it changed
// anything.
func (s *runState) elideOldOutputs() bool {
	cut := s.keepFrom()
	changed := false
	for i := s.pinned; i < cut; i++ {
		m := &s.msgs[i]
		observation := m.Role == RoleTool || (s.textMode && m.Role == RoleUser && !m.Summary)
		if !observation || len(m.Content) < elideMinChars || strings.HasPrefix(m.Content, "[output elided") {
			continue
		}
		m.Content = fmt.Sprintf("[output elided to save context: %d characters]", len(m.Content))
		changed = true
	}
	if changed {
		s.logEvent("compaction: elided old tool outputs")
		s.traj.write(Record{Kind: RecordCompaction, Turn: s.turn, Note: "elided old tool outputs"})
	}
	return changed
}

// summarise replaces the turns between the pinned head and the kept tail
// with one summary message written by the model.
func (s *runState) summarise(ctx context.Context) error {
	cut := s.keepFrom()
	if cut <= s.pinned {
		return fmt.Errorf("nothing old enough to summarise (keeping the last %d turns)", s.a.cfg.Compaction.KeepTurns)
	}
	data := map[string]any{"Transcript": transcript(s.msgs[s.pinned:cut])}
	prompt, err := render(s.a.prompts.compaction, data)
	if err != nil {
		return err
	}
	resp, err := s.chat(ctx, ModelRequest{Model: s.r.ModelName, Messages: []Message{{Role: RoleUser, Content: prompt}}}, nil)
	if err != nil {
		return fmt.Errorf("summarise: %w", err)
	}
	s.account(resp, 0)
	summary := strings.TrimSpace(resp.Message.Content)
	if summary == "" {
		return fmt.Errorf("summarise: the model returned an empty summary")
	}
	folded := cut - s.pinned
	kept := append([]Message(nil), s.msgs[cut:]...)
	s.msgs = append(s.msgs[:s.pinned], Message{
		Role:    RoleUser,
		Content: "Summary of the earlier part of this session (older turns were compacted):\n\n" + summary,
		Summary: true,
	})
	s.traj.message(s.turn, &s.msgs[len(s.msgs)-1])
	s.msgs = append(s.msgs, kept...)
	s.compactions++
	s.lastInputAt = 0
	s.emit(task.Event{Kind: task.EventLog, Text: fmt.Sprintf("compaction: %d messages summarised", folded)})
	s.traj.write(Record{Kind: RecordCompaction, Turn: s.turn, Note: fmt.Sprintf("%d messages summarised", folded)})
	return nil
}

// transcript renders messages as plain text for the summariser.
func transcript(msgs []Message) string {
	var b strings.Builder
	for _, m := range msgs {
		content := m.Content
		if len(content) > transcriptPerItem {
			h, t, _ := truncateMiddle(content, transcriptPerItem)
			content = h + "\n[...]\n" + t
		}
		switch {
		case m.Summary:
			fmt.Fprintf(&b, "[earlier summary]\n%s\n\n", content)
		case m.Role == RoleTool:
			fmt.Fprintf(&b, "[tool result]\n%s\n\n", content)
		default:
			if content != "" {
				fmt.Fprintf(&b, "[%s]\n%s\n\n", m.Role, content)
			}
			for _, tc := range m.ToolCalls {
				args := tc.Arguments
				if len(args) > transcriptPerItem {
					args = args[:transcriptPerItem] + "…"
				}
				fmt.Fprintf(&b, "[tool call] %s %s\n\n", tc.Name, args)
			}
		}
	}
	return strings.TrimSpace(b.String())
}
