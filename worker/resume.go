package worker

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/wrenchworks/wrench/agent"
	"github.com/wrenchworks/wrench/sandbox"
	"github.com/wrenchworks/wrench/task"
)

// Resumes keeps each running task's latest save point (the queue's object
// store, in a service), for a later attempt to continue from.
type Resumes interface {
	// SaveResume replaces task id's save point.
	SaveResume(ctx context.Context, id string, data []byte) error
	// LoadResume returns task id's save point; nil (and no error) when it
	// has none.
	LoadResume(ctx context.Context, id string) ([]byte, error)
}

// resumeVersion is the format of a saved resumeState.
const resumeVersion = 1

// resumeState is what a save keeps: the agent's save point and the
// workspace's tree at that moment, as its patch since the base commit.
type resumeState struct {
	Version    int    `json:"version"`
	Attempt    int    `json:"attempt"`
	BaseCommit string `json:"base_commit"`
	Patch      string `json:"patch"`
	agent.SavePoint
}

// resumeTimeout bounds saving or loading one save point.
const resumeTimeout = 30 * time.Second

// saver returns the agent's OnSave: the tree's patch since the base commit
// and the save point, secrets redacted, stored for a later attempt. A
// failed save is logged; the next one tries again.
func (r *taskRun) saver(ctx context.Context, ws sandbox.Checkpointer, base string) func(agent.SavePoint) {
	if r.w.cfg.Resumes == nil || ws == nil {
		return nil
	}
	return func(sp agent.SavePoint) {
		sctx, cancel := context.WithTimeout(ctx, resumeTimeout)
		defer cancel()
		err := r.save(sctx, ws, base, sp)
		if err != nil && ctx.Err() == nil {
			r.log.Warn("save the run for a later attempt", "turn", sp.Turn, "err", err)
		}
	}
}

func (r *taskRun) save(ctx context.Context, ws sandbox.Checkpointer, base string, sp agent.SavePoint) error {
	patch, err := ws.Diff(ctx)
	if err != nil {
		return fmt.Errorf("diff: %w", err)
	}
	secrets := r.allSecrets()
	sp.Messages = redactMessages(sp.Messages, secrets)
	st := resumeState{Version: resumeVersion, Attempt: r.attempt, BaseCommit: base, Patch: task.RedactSecrets(patch, secrets), SavePoint: sp}
	data, err := json.Marshal(st)
	if err != nil {
		return err
	}
	return r.w.cfg.Resumes.SaveResume(ctx, r.t.ID, data)
}

// redactMessages returns msgs with secrets replaced in every text.
func redactMessages(msgs []agent.Message, secrets []string) []agent.Message {
	out := make([]agent.Message, len(msgs))
	for i, m := range msgs {
		m.Content = task.RedactSecrets(m.Content, secrets)
		m.Thinking = task.RedactSecrets(m.Thinking, secrets)
		if len(m.ToolCalls) > 0 {
			calls := append([]agent.ToolCall(nil), m.ToolCalls...)
			for j := range calls {
				calls[j].Arguments = task.RedactSecrets(calls[j].Arguments, secrets)
			}
			m.ToolCalls = calls
		}
		out[i] = m
	}
	return out
}

// resumed is a save point restored into this attempt's sandbox.
type resumed struct {
	point      *agent.SavePoint
	checkpoint string // of the restored tree
}

// restore continues an earlier attempt's work when the policy allows it
// (resume): its save point's tree goes into the fresh sandbox (as a
// checkpoint) and the save point to the agent. Nil when there is nothing to
// resume, or the save point does not fit (a moved base commit, a patch that
// does not apply): the attempt then starts over from baseCP, saying why.
func (r *taskRun) restore(ctx context.Context, env sandbox.Env, ws sandbox.Checkpointer, resume bool, base, baseCP string) *resumed {
	if r.attempt <= 1 || !resume || r.w.cfg.Resumes == nil || ws == nil {
		return nil
	}
	lctx, cancel := context.WithTimeout(ctx, resumeTimeout)
	data, err := r.w.cfg.Resumes.LoadResume(lctx, r.t.ID)
	cancel()
	if err != nil {
		r.log.Warn("load the earlier attempt's save point", "err", err)
	}
	if data == nil {
		return nil
	}
	st, err := decodeResume(data, base)
	if err == nil {
		err = applyPatch(ctx, env, st.Patch)
	}
	if err == nil {
		var cp string
		if cp, err = ws.Checkpoint(ctx, fmt.Sprintf("wrench: resumed at turn %d", st.Turn)); err == nil {
			return &resumed{point: &st.SavePoint, checkpoint: cp}
		}
		if baseCP != "" {
			_ = ws.Rollback(ctx, baseCP) // the patch applied: take it out again
		}
	}
	r.emit(task.Event{Kind: task.EventLog, IsError: true, Text: "not resumed, starting over: " + err.Error()})
	return nil
}

// decodeResume reads a saved resumeState and checks it fits a run from
// base.
func decodeResume(data []byte, base string) (resumeState, error) {
	var st resumeState
	if err := json.Unmarshal(data, &st); err != nil {
		return st, fmt.Errorf("save point: %w", err)
	}
	switch {
	case st.Version != resumeVersion:
		return st, fmt.Errorf("save point format %d, not %d", st.Version, resumeVersion)
	case st.BaseCommit != base:
		return st, fmt.Errorf("the task now starts from %s, its save point from %s", short(base), short(st.BaseCommit))
	}
	return st, nil
}

// resumedLine is the result's and the event's line for a resumed attempt.
func resumedLine(turn int, cause string) string {
	if cause == "" {
		cause = "an earlier attempt ended"
	}
	return fmt.Sprintf("resumed at turn %d after %s", turn, cause)
}

// applyPatch applies a patch made by the workspace's Diff to the sandbox's
// tree.
func applyPatch(ctx context.Context, env sandbox.Env, patch string) error {
	if patch == "" {
		return nil
	}
	res, err := env.Exec(ctx, sandbox.ExecRequest{Command: "git apply --whitespace=nowarn -", Stdin: []byte(patch), Timeout: 2 * time.Minute})
	switch {
	case err != nil:
		return fmt.Errorf("apply the saved patch: %w", err)
	case res.ExitCode != 0:
		return fmt.Errorf("the saved patch does not apply (exit %d): %s", res.ExitCode, tailString(res.Output, 2<<10))
	}
	return nil
}

// atLeast is a and b field by field, the larger of each: the model use
// that both accounts (the dispatcher's record of earlier attempts, a save
// point) show at least.
func atLeast(a, b task.Usage) task.Usage {
	return task.Usage{
		InputTokens: max(a.InputTokens, b.InputTokens), OutputTokens: max(a.OutputTokens, b.OutputTokens),
		CostUSD: max(a.CostUSD, b.CostUSD), Turns: max(a.Turns, b.Turns),
		ToolCalls: max(a.ToolCalls, b.ToolCalls), ModelCalls: max(a.ModelCalls, b.ModelCalls),
	}
}

func short(commit string) string { return commit[:min(12, len(commit))] }
