package agent

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/wrenchworks/wrench/task"
)

// runState is everything one run owns. It lives on the run's goroutine and
// is never shared, which is what makes the Agent stateless.
type runState struct {
	a *Agent
	r *Run

	tools    *toolbox
	specs    []ToolSpec // what the model is told it may call
	textMode bool

	msgs   []Message
	pinned int // leading messages compaction never touches

	turn  int
	usage task.Usage
	lim   effectiveLimits
	start time.Time
	// deadline is the current wall-clock limit (zero: none).
	deadline time.Time
	// window is the model's context window in tokens.
	window int

	formatErrs   int
	intentNudges int

	// planning says the run is in its planning phase (PlanFirst); plan is
	// the plan it ended with.
	planning bool
	plan     string
	// envInfo is the environment the prompts describe (probed once).
	envInfo *EnvInfo
	diag    diagnostics

	seen    *readTracker
	history map[string][]FileVersion
	rec     recovery
	loops   loopDetector
	ver     verifyState

	saved saveState // the last save point (Run.OnSave)

	compactions     int // summaries made
	compactTries    int // summaries attempted
	lastCompactTurn int
	// lastInput is the input tokens the last model call reported, and
	// lastInputAt how many messages that call saw (0: unknown).
	lastInput   int64
	lastInputAt int

	seq       uint64
	traj      *trajectory
	priceWarn bool
}

// effectiveLimits are the limits in force, raised when OnLimit says go on.
type effectiveLimits struct {
	turns     int
	costUSD   float64
	tokens    int64
	formatErr int
}

func (a *Agent) newState(ctx context.Context, r *Run) (*runState, error) {
	caps := capabilitiesOf(r.Model)
	protocol, err := a.checkRun(r, caps)
	if err != nil {
		return nil, err
	}
	tools, err := a.toolSet(r.Mode, r.AllowedTools)
	if err != nil {
		return nil, err
	}
	if protocol == task.ProtocolText && !slices.ContainsFunc(tools, func(t *toolDef) bool { return t.name == ToolBash }) {
		return nil, fmt.Errorf("%w: the text protocol needs the bash tool (not available in plan mode or without it in the allowlist)", ErrInvalidRun)
	}
	s := &runState{
		a:        a,
		r:        r,
		textMode: protocol == task.ProtocolText,
		start:    time.Now(), // monotonic: Config.Now may be pinned
		window:   a.cfg.contextWindow(r.ModelName, caps.ContextWindow),
		seen:     newReadTracker(),
		history:  map[string][]FileVersion{},
		rec:      newRecovery(a.cfg.Recovery.AttemptBudget),
		loops:    newLoopDetector(a.cfg.Recovery.LoopWindow, a.cfg.Recovery.LoopRepeats),
		lim:      limitsOf(r.Limits),
		usage:    r.Spent,
	}
	s.usage.Turns = 0
	s.resume()
	s.tools = newToolbox(s.toolKit())
	if r.PlanFirst {
		s.planning = true
		tools, _ = a.toolSet(task.ModePlan, r.AllowedTools)
	}
	s.setTools(tools)
	if r.Limits.Timeout > 0 {
		s.deadline = s.start.Add(r.Limits.Timeout)
	}
	if r.Trajectory != nil {
		s.traj = newTrajectory(r.Trajectory, r.Secrets, a.cfg.Now)
	}
	if err := s.initMessages(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

// checkRun refuses unusable input (wrapping ErrInvalidRun) and resolves
// the protocol: the tools protocol unless asked or the model cannot call
// tools.
func (a *Agent) checkRun(r *Run, caps Capabilities) (task.Protocol, error) {
	switch {
	case r.Model == nil:
		return "", fmt.Errorf("%w: nil Model", ErrInvalidRun)
	case r.Env == nil:
		return "", fmt.Errorf("%w: nil Env", ErrInvalidRun)
	case a.promptErr != nil:
		return "", a.promptErr
	}
	protocol := r.Protocol
	switch protocol {
	case "":
		protocol = task.ProtocolTools
		if caps.NoToolCalling {
			protocol = task.ProtocolText
		}
	case task.ProtocolTools, task.ProtocolText:
	default:
		return "", fmt.Errorf("%w: protocol %q is not one of tools, text", ErrInvalidRun, r.Protocol)
	}
	switch r.Mode {
	case task.ModeNormal, task.ModePlan:
	default:
		return "", fmt.Errorf("%w: mode %q is not one of \"\", plan", ErrInvalidRun, r.Mode)
	}
	switch r.Verify {
	case "", VerifyOnFinish, VerifyAfterWrite, VerifyNever:
	default:
		return "", fmt.Errorf("%w: verify policy %q is not one of finish, after_write, never", ErrInvalidRun, r.Verify)
	}
	if err := validApproval(r); err != nil {
		return "", err
	}
	if r.PlanFirst && (r.Mode == task.ModePlan || protocol == task.ProtocolText) {
		return "", fmt.Errorf("%w: PlanFirst needs the tools protocol and normal mode", ErrInvalidRun)
	}
	return protocol, nil
}

// toolKit is what the run offers its tools.
func (s *runState) toolKit() *toolKit {
	k := &toolKit{env: s.r.Env, seen: s.seen, research: s, cfg: &s.a.cfg}
	if s.r.Approval == ApproveConfirm {
		k.approve = s.approve
	}
	return k
}

// limitsOf is the limits a run starts with.
func limitsOf(l Limits) effectiveLimits {
	lim := effectiveLimits{
		turns:     turnLimit(l),
		costUSD:   l.MaxCostUSD,
		tokens:    l.MaxTokens,
		formatErr: l.MaxFormatErrors,
	}
	if lim.formatErr <= 0 {
		lim.formatErr = DefaultMaxFormatErrors
	}
	return lim
}

// turnLimit resolves MaxTurns and HardTurnCap to one number.
func turnLimit(l Limits) int {
	if l.MaxTurns > 0 {
		return l.MaxTurns
	}
	if l.HardTurnCap > 0 {
		return l.HardTurnCap
	}
	return task.MaxTurnsHardCap
}

// appendMsg adds a message to the history and the trajectory.
func (s *runState) appendMsg(m Message) {
	s.msgs = append(s.msgs, m)
	s.traj.message(s.turn, &s.msgs[len(s.msgs)-1])
}

// emit sends one event to OnEvent, secrets redacted.
func (s *runState) emit(e task.Event) {
	if s.r.OnEvent == nil {
		return
	}
	s.seq++
	e.TaskID = s.r.Task.ID
	e.Seq = s.seq
	e.Time = s.a.cfg.Now()
	if e.Turn == 0 {
		e.Turn = s.turn
	}
	if e.Text != "" && len(s.r.Secrets) > 0 {
		e.Text = redactString(e.Text, s.r.Secrets)
	}
	s.r.OnEvent(e)
}

func (s *runState) logEvent(format string, args ...any) {
	s.emit(task.Event{Kind: task.EventLog, Text: fmt.Sprintf(format, args...)})
}
