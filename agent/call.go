package agent

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/wrenchworks/wrench/task"
)

// callModel asks the model for the next reply with the whole history and
// accounts for its usage.
func (s *runState) callModel(ctx context.Context) (ModelResponse, error) {
	req := ModelRequest{Model: s.r.ModelName, Messages: s.msgs, Tools: s.specs}
	streamed := false
	onDelta := func(ev StreamEvent) {
		if s.r.OnStream != nil {
			s.r.OnStream(ev)
		}
		if ev.Kind == StreamRetry {
			s.logEvent("model call failed: %s", ev.Text)
			return
		}
		if !s.r.StreamEvents {
			return
		}
		switch ev.Kind {
		case StreamText:
			streamed = true
			s.emit(task.Event{Kind: task.EventContent, Text: ev.Text})
		case StreamThinking:
			streamed = true
			s.emit(task.Event{Kind: task.EventThinking, Text: ev.Text})
		}
	}
	start := time.Now()
	resp, err := s.chat(ctx, req, onDelta)
	if err != nil {
		return resp, err
	}
	s.account(resp, time.Since(start))
	s.lastInput, s.lastInputAt = resp.Usage.InputTokens, len(s.msgs)
	if !streamed {
		if resp.Message.Thinking != "" {
			s.emit(task.Event{Kind: task.EventThinking, Text: resp.Message.Thinking})
		}
		if resp.Message.Content != "" {
			s.emit(task.Event{Kind: task.EventContent, Text: resp.Message.Content})
		}
	}
	return resp, nil
}

// chat calls the model, retrying retryable failures with exponential
// backoff (or the server's Retry-After) while ctx lives.
func (s *runState) chat(ctx context.Context, req ModelRequest, onDelta func(StreamEvent)) (ModelResponse, error) {
	delay := s.a.cfg.RetryBackoff
	for attempt := 0; ; attempt++ {
		resp, err := s.chatOnce(ctx, req, onDelta)
		if err == nil {
			return resp, nil
		}
		if ctx.Err() != nil {
			return resp, ctx.Err()
		}
		var me *ModelError
		if !errors.As(err, &me) || !me.Retryable() || attempt >= s.a.cfg.ModelRetries {
			return resp, err
		}
		wait := max(delay, me.RetryAfter)
		s.logEvent("model call failed (%v); retry %d of %d in %s", err, attempt+1, s.a.cfg.ModelRetries, wait)
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return resp, ctx.Err()
		case <-t.C:
		}
		delay *= 2
	}
}

// chatOnce makes one model call; with a Budget, its worst-case cost is
// reserved first and what it cost settled after.
func (s *runState) chatOnce(ctx context.Context, req ModelRequest, onDelta func(StreamEvent)) (ModelResponse, error) {
	if s.r.Budget == nil {
		return s.r.Model.Chat(ctx, req, onDelta)
	}
	if req.MaxTokens <= 0 {
		req.MaxTokens = s.a.cfg.MaxOutputTokens
	}
	worst, _ := s.a.cfg.Cost(s.r.ModelName, TokenUsage{InputTokens: s.promptTokens(req), OutputTokens: int64(req.MaxTokens)})
	hold, err := s.r.Budget.Reserve(ctx, worst)
	if errors.Is(err, task.ErrOverBudget) {
		return ModelResponse{}, err
	}
	if err != nil {
		return ModelResponse{}, fmt.Errorf("%w: budget ledger: %w", ErrEnvFailed, err)
	}
	resp, err := s.r.Model.Chat(ctx, req, onDelta)
	var cost float64
	if err == nil {
		cost, _ = s.a.cfg.Cost(s.r.ModelName, resp.Usage)
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), settleTimeout)
	defer cancel()
	if serr := hold.Settle(sctx, cost); serr != nil {
		s.logEvent("budget: settle a model call's cost: %v (its worst case stays held until it expires)", serr)
	}
	return resp, err
}

// settleTimeout bounds settling one call's cost with the Budget.
const settleTimeout = 30 * time.Second

// promptTokens estimates a request's input tokens: its messages and tool
// specs, or for the run's own history what the last call reported plus
// what was added since, whichever is more.
func (s *runState) promptTokens(req ModelRequest) int64 {
	n := estimateTokens(req.Messages)
	for _, t := range req.Tools {
		n += int64((len(t.Name)+len(t.Description)+len(t.Parameters))/charsPerToken) + 4
	}
	if len(req.Messages) > 0 && len(req.Messages) == len(s.msgs) && &req.Messages[0] == &s.msgs[0] {
		n = max(n, s.historyTokens())
	}
	return n
}

// account adds one model call's usage and cost, and reports it.
func (s *runState) account(resp ModelResponse, d time.Duration) {
	u := resp.Usage
	cost, priced := s.a.cfg.Cost(s.r.ModelName, u)
	if !priced && !s.priceWarn {
		s.priceWarn = true
		s.logEvent("no price for model %q: its cost counts as 0 and max_cost does not bound it", s.r.ModelName)
	}
	s.usage.InputTokens += u.InputTokens
	s.usage.OutputTokens += u.OutputTokens
	s.usage.CostUSD += cost
	s.usage.ModelCalls++
	delta := task.Usage{InputTokens: u.InputTokens, OutputTokens: u.OutputTokens, CostUSD: cost, ModelCalls: 1}
	s.emit(task.Event{Kind: task.EventUsage, Usage: &delta, Model: s.r.ModelName, Elapsed: task.Duration(d)})
	s.traj.write(Record{Kind: RecordUsage, Turn: s.turn, Usage: &u, CostUSD: cost, Duration: d, Model: resp.Model})
}

// checkLimits runs before every model call: turns, cost, tokens, wall
// clock and consecutive format errors. A reached limit is reported and
// OnLimit may raise it.
func (s *runState) checkLimits() *ending {
	for {
		reason := s.limitReached()
		if reason == "" {
			return nil
		}
		if !s.askLimit(reason) {
			return &ending{reason: reason}
		}
	}
}

func (s *runState) limitReached() StopReason {
	switch {
	case s.turn >= s.lim.turns:
		return StopMaxTurns
	case s.lim.costUSD > 0 && s.usage.CostUSD >= s.lim.costUSD:
		return StopMaxCost
	case s.lim.tokens > 0 && s.usage.InputTokens+s.usage.OutputTokens >= s.lim.tokens:
		return StopMaxTokens
	case !s.deadline.IsZero() && !time.Now().Before(s.deadline):
		return StopTimeout
	case s.formatErrs >= s.lim.formatErr:
		return StopFormatErrors
	}
	return ""
}

// askLimit reports a reached limit and asks OnLimit whether to go on; if
// so the limit is raised by its original amount.
func (s *runState) askLimit(reason StopReason) bool {
	s.emit(task.Event{Kind: task.EventLimit, Text: string(reason)})
	s.traj.write(Record{Kind: RecordLimit, Turn: s.turn, Reason: reason})
	if s.r.OnLimit == nil || !s.r.OnLimit(reason) {
		return false
	}
	l := s.r.Limits
	switch reason {
	case StopMaxTurns:
		s.lim.turns = s.turn + turnLimit(l)
	case StopMaxCost:
		s.lim.costUSD = s.usage.CostUSD + l.MaxCostUSD
	case StopMaxTokens:
		s.lim.tokens = s.usage.InputTokens + s.usage.OutputTokens + l.MaxTokens
	case StopTimeout:
		s.deadline = time.Now().Add(l.Timeout)
	case StopFormatErrors:
		s.formatErrs = 0
	}
	return true
}
