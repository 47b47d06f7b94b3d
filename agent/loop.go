package agent

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/wrenchworks/wrench/task"
)

// ending is why and how a run stops; nil means "go on".
type ending struct {
	reason  StopReason
	summary string
	err     error
}

// Run executes one run to its end. The returned error is reserved for
// invalid input (a nil Model or Env, a bad protocol, mode, verify policy or
// allowlist, a prompt that does not render) and wraps ErrInvalidRun; every
// other ending, cancellation included, is an Outcome. Run returns within a
// second of ctx being cancelled provided the Model and Env honour ctx, and
// leaves no goroutine behind.
func (a *Agent) Run(ctx context.Context, r *Run) (*Outcome, error) {
	if r == nil {
		return nil, fmt.Errorf("%w: nil Run", ErrInvalidRun)
	}
	s, err := a.newState(ctx, r)
	if err != nil {
		return nil, err
	}
	e := s.loop(ctx)
	return s.outcome(e), nil
}

// loop is the agent loop: check limits, maybe compact, ask the model, act
// on its reply; until something ends the run.
func (s *runState) loop(ctx context.Context) *ending {
	if e := s.prepareVerification(ctx); e != nil {
		return e
	}
	s.saved.checkpoint = s.ver.goodID
	for {
		stepCtx, cancel := s.stepContext(ctx)
		e := s.step(ctx, stepCtx)
		cancel()
		if e == nil {
			continue
		}
		if e.reason == StopTimeout && s.askLimit(StopTimeout) {
			continue
		}
		if e.reason == StopBudget {
			// Paused, not over: the next attempt continues from here.
			s.save()
		}
		return e
	}
}

// step is one turn. parent is the caller's context (its cancellation ends
// the run); ctx adds the wall-clock deadline.
func (s *runState) step(parent, ctx context.Context) *ending {
	if e := s.checkLimits(); e != nil {
		return e
	}
	if e := s.maybeCompact(parent, ctx); e != nil {
		return e
	}
	s.turn++
	s.usage.Turns++
	s.emit(task.Event{Kind: task.EventTurn})
	resp, err := s.callModel(ctx)
	if err != nil {
		if errors.Is(err, task.ErrOverBudget) {
			// The turn never happened: a later attempt makes it.
			s.turn--
			s.usage.Turns--
		}
		return s.stopFor(parent, err)
	}
	var e *ending
	if s.textMode {
		e = s.textTurn(parent, ctx, resp)
	} else {
		e = s.toolTurn(parent, ctx, resp)
	}
	if e == nil {
		s.maybeSave()
	}
	return e
}

// stepContext bounds a step by the wall-clock limit.
func (s *runState) stepContext(ctx context.Context) (context.Context, context.CancelFunc) {
	if s.deadline.IsZero() {
		return ctx, func() {}
	}
	return context.WithDeadline(ctx, s.deadline)
}

// stopFor maps an error that ended a step to a reason.
func (s *runState) stopFor(parent context.Context, err error) *ending {
	switch {
	case parent.Err() != nil:
		return &ending{reason: StopCancelled, err: context.Cause(parent)}
	case errors.Is(err, task.ErrOverBudget):
		return &ending{reason: StopBudget, err: err}
	case errors.Is(err, context.DeadlineExceeded) && !s.deadline.IsZero() && !time.Now().Before(s.deadline):
		return &ending{reason: StopTimeout, err: err}
	case envFailed(err):
		return &ending{reason: StopEnvError, err: err}
	}
	return &ending{reason: StopModelError, err: err}
}

// toolTurn acts on a tool-calling reply.
func (s *runState) toolTurn(parent, ctx context.Context, resp ModelResponse) *ending {
	msg := resp.Message
	msg.Role = RoleAssistant
	if len(msg.ToolCalls) == 0 && s.tools.has(ToolSearchReplace) {
		if edits := fileEditCalls(msg.Content, s.turn); len(edits) > 0 {
			msg.ToolCalls = edits
			s.logEvent("the reply's %d <file-edit> block(s) run as search_replace calls", len(edits))
		}
	}
	if len(msg.ToolCalls) == 0 {
		s.appendMsg(msg)
		return s.noToolCalls(resp)
	}
	s.intentNudges = 0
	// Every call needs an id unique within the reply to tie its result
	// (on a copy: the reply's slice belongs to the model).
	msg.ToolCalls = slices.Clone(msg.ToolCalls)
	ids := make(map[string]bool, len(msg.ToolCalls))
	for i := range msg.ToolCalls {
		if id := msg.ToolCalls[i].ID; id == "" || ids[id] {
			msg.ToolCalls[i].ID = fmt.Sprintf("call_%d_%d", s.turn, i)
		}
		ids[msg.ToolCalls[i].ID] = true
	}
	var refused map[int]string
	msg.ToolCalls, refused = s.capCalls(msg.ToolCalls)
	s.appendMsg(msg)
	return s.runCalls(parent, ctx, msg.ToolCalls, refused)
}

// noToolCalls handles a reply without tool calls: cut off, empty, an
// announced but undone action (nudged), or the model's last word.
func (s *runState) noToolCalls(resp ModelResponse) *ending {
	content := resp.Message.Content
	switch {
	case resp.FinishReason == FinishContentFilter:
		return &ending{reason: StopModelError, err: &ModelError{Kind: ModelBadResponse, Err: errors.New("reply stopped by the content filter")}}
	case resp.FinishReason == FinishLength:
		s.formatErrs++
		s.appendMsg(Message{Role: RoleUser, Content: "Your reply was cut off at the output token limit. Continue in smaller steps: one tool call at a time, and shorter edits."})
		return nil
	case isBlank(content):
		s.formatErrs++
		s.appendMsg(Message{Role: RoleUser, Content: "Your reply was empty. Use a tool to make progress, or call finish when the task is done."})
		return nil
	case s.intentNudges < s.a.cfg.Recovery.MaxIntentNudges && incompleteIntent(content):
		s.intentNudges++
		s.appendMsg(Message{Role: RoleUser, Content: intentNudge})
		return nil
	}
	return &ending{reason: StopNoToolCalls, summary: content}
}

// runCalls runs a reply's tool calls in order and appends one result per
// call, in the same order, whatever happens. refused holds the answers of
// calls over the caps (see capCalls).
func (s *runState) runCalls(parent, ctx context.Context, calls []ToolCall, refused map[int]string) *ending {
	malformed := false
	var end *ending
	skip := "" // why the rest of the reply is not run, without ending the run
	for i, call := range calls {
		switch {
		case end != nil:
			s.toolMessage(call, "Not run: "+end.notRunWhy(), "", true)
			continue
		case skip != "":
			s.toolMessage(call, "Not run: "+skip, "", true)
			continue
		case ctx.Err() != nil:
			end = s.stopFor(parent, ctx.Err())
			s.toolMessage(call, "Not run: interrupted.", "", true)
			continue
		case refused[i] != "":
			s.toolMessage(call, refused[i], "", true)
			malformed = true
			continue
		}
		res := s.runCall(ctx, call, call.Arguments)
		switch {
		case res.fatal != nil:
			end = s.stopFor(parent, res.fatal)
			s.toolMessage(call, res.output, "", true)
			continue
		case res.denied:
			end = &ending{reason: StopDenied, err: res.deniedErr}
			s.toolMessage(call, res.output, "", true)
			continue
		}
		malformed = malformed || res.format
		notes, stop := s.afterCall(parent, ctx, call, &res)
		switch {
		case stop != nil:
			end = stop
		case res.finish && s.planning:
			skip = s.endPlanning(&res)
		case res.finish:
			end = s.onFinish(parent, ctx, &res, &notes)
		}
		s.toolMessage(call, joinNotes(res.output, notes), cmp.Or(res.display, res.output), res.isError)
	}
	if malformed {
		s.formatErrs++
	} else {
		s.formatErrs = 0
	}
	return end
}

// runCall runs one call through the toolbox, reported as an event (with
// shown as its text) and in the trajectory.
func (s *runState) runCall(ctx context.Context, call ToolCall, shown string) toolResult {
	s.emit(task.Event{Kind: task.EventToolCall, Tool: call.Name, Text: shown})
	s.traj.call(s.turn, call)
	start := time.Now()
	res := s.tools.dispatch(ctx, call)
	s.usage.ToolCalls++
	if res.raw == "" {
		res.raw = res.output
	}
	s.addDiagnostics(ctx, &res)
	s.traj.result(s.turn, call, &res, time.Since(start))
	return res
}

// notRunWhy explains why calls after an ending were skipped.
func (e *ending) notRunWhy() string {
	switch e.reason {
	case StopFinished, StopUnverified:
		return "finish was called earlier in this reply."
	case StopCancelled, StopTimeout:
		return "interrupted."
	case StopDenied:
		return "an earlier call in this reply was denied."
	}
	return "the run stopped (" + string(e.reason) + ")."
}

// toolMessage appends a call's result to the history: content for the
// model, display (or content, when empty) for the tool_result event.
func (s *runState) toolMessage(call ToolCall, content, display string, isError bool) {
	s.appendMsg(Message{Role: RoleTool, ToolCallID: call.ID, Content: content})
	if display == "" {
		display = content
	}
	s.emit(task.Event{Kind: task.EventToolResult, Tool: call.Name, Text: eventText(display), IsError: isError})
}

// afterCall does the bookkeeping that follows a call: the file history,
// error recovery, loop detection and verification after writes. It returns notes for the model and, when a loop is detected the
// second time, the ending.
func (s *runState) afterCall(parent, ctx context.Context, call ToolCall, res *toolResult) (notes []string, stop *ending) {
	for _, w := range res.writes {
		s.history[w.path] = append(s.history[w.path], FileVersion{Turn: s.turn, Tool: call.Name, Before: w.before, After: w.after})
	}
	changed := res.changed()
	if ex := res.exec; ex != nil {
		if ex.ExitCode != 0 || ex.TimedOut {
			class := ClassifyError(string(ex.Output), ex.ExitCode, ex.TimedOut)
			if n := s.rec.failure(class, string(ex.Output), res.cmd, len(s.history) > 0); n != "" {
				notes = append(notes, n)
			}
		} else {
			s.rec.success(res.cmd, false)
		}
	}
	if res.mayWrite || len(changed) > 0 {
		s.ver.touch(changed)
	}
	nudge, loop := s.loops.observe(loopKey(call.Name, call.Arguments, res.raw))
	switch {
	case loop:
		notes = append(notes, "The run is stopped: the same call kept producing the same result after a warning.")
		s.logEvent("loop detected: %s repeated with the same result", call.Name)
		return notes, &ending{reason: StopLoopDetected}
	case nudge:
		notes = append(notes, fmt.Sprintf(loopNudge, s.a.cfg.Recovery.LoopRepeats))
	}
	if s.verifyPolicy() == VerifyAfterWrite && len(changed) > 0 && !res.isError {
		v, e := s.verify(parent, ctx, "after "+call.Name)
		if e != nil {
			return notes, e
		}
		notes = append(notes, v.note)
	}
	return notes, nil
}

// onFinish verifies a finish call when the policy asks for it. A failing
// verification (or a rollback) turns the finish into an error result the
// model sees, at most MaxFinishRejections times; then the run ends
// finished_unverified.
func (s *runState) onFinish(parent, ctx context.Context, res *toolResult, notes *[]string) *ending {
	if !s.canVerify() {
		return &ending{reason: StopFinished, summary: res.summary}
	}
	rolledBack := false
	if s.ver.dirty || s.ver.current == nil {
		v, e := s.verify(parent, ctx, "finish")
		if e != nil {
			return e
		}
		*notes = append(*notes, v.note)
		rolledBack = v.rolledBack
	}
	cur := s.ver.current
	if cur != nil && cur.run.Passed && !rolledBack {
		*notes = nil
		res.output = "Finished: the tests pass."
		return &ending{reason: StopFinished, summary: res.summary}
	}
	s.ver.rejections++
	if s.ver.rejections > s.a.cfg.MaxFinishRejections {
		res.output = "Finished without passing tests."
		return &ending{reason: StopUnverified, summary: res.summary}
	}
	res.isError = true
	left := s.a.cfg.MaxFinishRejections - s.ver.rejections + 1
	if rolledBack {
		res.output = fmt.Sprintf("Not finished: your latest changes broke tests and were rolled back (see below). Continue, or call finish again to finish with the workspace as it is now (%d more refusal(s) before finish is accepted unverified).", left)
		return nil
	}
	res.output = fmt.Sprintf("Not finished: the test command `%s` fails (see below). Fix the failures and call finish again; after %d more refusal(s) finish is accepted as unverified.", s.r.Task.TestCommand, left)
	if len(*notes) == 0 && cur != nil {
		*notes = append(*notes, "Last verification output:\n"+capOutput(cur.run.Output, s.a.cfg.MaxOutputChars, 0))
	}
	return nil
}

func joinNotes(output string, notes []string) string {
	for _, n := range notes {
		if n != "" {
			output += "\n\n" + n
		}
	}
	return output
}

// eventText bounds the text an event carries.
func eventText(s string) string {
	const max = 4000
	if len(s) <= max {
		return s
	}
	h, t, _ := truncateMiddle(s, max)
	return h + "\n[...]\n" + t
}

// outcome assembles the Outcome and closes the trajectory. The partial
// work stays in the workspace: its diff is the caller's to take, once.
func (s *runState) outcome(e *ending) *Outcome {
	out := &Outcome{
		Reason:      e.reason,
		Summary:     e.summary,
		Err:         e.err,
		Usage:       s.usage,
		Messages:    s.msgs,
		LastTestRun: s.ver.last,
		Checkpoint:  s.ver.goodID,
		Rollbacks:   s.ver.rollbacks,
		Compactions: s.compactions,
		FileHistory: s.history,
		Plan:        s.plan,
	}
	out.Duration = time.Since(s.start)
	s.logEvent("run ended: %s", e.reason)
	s.traj.outcome(s.turn, out)
	return out
}
