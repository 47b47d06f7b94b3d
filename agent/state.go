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

	tools     []*tool
	toolIndex map[string]*tool
	specs     []ToolSpec
	textMode  bool

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

	// call is the tool call being run (for approval requests).
	call ToolCall
	// planning says the run is in its planning phase (PlanFirst); plan is
	// the plan it ended with.
	planning bool
	plan     string
	// envInfo is the environment the prompts describe (probed once).
	envInfo *EnvInfo
	diag    diagnostics
	subRuns int

	seen    map[string][32]byte // path -> content hash when last viewed or written
	history map[string][]FileVersion
	rec     recovery
	loops   loopDetector
	ver     verifyState

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
	switch {
	case r.Model == nil:
		return nil, fmt.Errorf("%w: nil Model", ErrInvalidRun)
	case r.Env == nil:
		return nil, fmt.Errorf("%w: nil Env", ErrInvalidRun)
	case a.promptErr != nil:
		return nil, a.promptErr
	}
	caps := capabilitiesOf(r.Model)
	protocol := r.Protocol
	switch protocol {
	case "":
		protocol = ProtocolTools
		if caps.NoToolCalling {
			protocol = ProtocolText
		}
	case ProtocolTools, ProtocolText:
	default:
		return nil, fmt.Errorf("%w: protocol %q is not one of tools, text", ErrInvalidRun, r.Protocol)
	}
	switch r.Mode {
	case ModeNormal, ModePlan:
	default:
		return nil, fmt.Errorf("%w: mode %q is not one of \"\", plan", ErrInvalidRun, r.Mode)
	}
	switch r.Verify {
	case "", VerifyOnFinish, VerifyAfterWrite, VerifyNever:
	default:
		return nil, fmt.Errorf("%w: verify policy %q is not one of finish, after_write, never", ErrInvalidRun, r.Verify)
	}
	if err := validApproval(r); err != nil {
		return nil, err
	}
	if r.PlanFirst && (r.Mode == ModePlan || protocol == ProtocolText) {
		return nil, fmt.Errorf("%w: PlanFirst needs the tools protocol and normal mode", ErrInvalidRun)
	}
	tools, err := a.toolSet(r.Mode, r.AllowedTools)
	if err != nil {
		return nil, err
	}
	if protocol == ProtocolText && !slices.ContainsFunc(tools, func(t *tool) bool { return t.name == ToolBash }) {
		return nil, fmt.Errorf("%w: the text protocol needs the bash tool (not available in plan mode or without it in the allowlist)", ErrInvalidRun)
	}
	s := &runState{
		a:        a,
		r:        r,
		textMode: protocol == ProtocolText,
		start:    time.Now(), // monotonic: Config.Now may be pinned
		window:   a.cfg.contextWindow(r.ModelName, caps.ContextWindow),
		seen:     map[string][32]byte{},
		history:  map[string][]FileVersion{},
		rec:      newRecovery(a.cfg.Recovery.AttemptBudget),
		loops:    newLoopDetector(a.cfg.Recovery.LoopWindow, a.cfg.Recovery.LoopRepeats),
	}
	if r.PlanFirst {
		s.planning = true
		tools, _ = a.toolSet(ModePlan, r.AllowedTools)
	}
	s.setTools(tools)
	s.lim = effectiveLimits{
		turns:     turnLimit(r.Limits),
		costUSD:   r.Limits.MaxCostUSD,
		tokens:    r.Limits.MaxTokens,
		formatErr: r.Limits.MaxFormatErrors,
	}
	if s.lim.formatErr <= 0 {
		s.lim.formatErr = DefaultMaxFormatErrors
	}
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

// turnLimit resolves MaxTurns and HardTurnCap to one number.
func turnLimit(l Limits) int {
	if l.MaxTurns > 0 {
		return l.MaxTurns
	}
	if l.HardTurnCap > 0 {
		return l.HardTurnCap
	}
	return DefaultHardTurnCap
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
