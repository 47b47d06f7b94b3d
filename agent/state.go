package agent

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"strings"
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

	formatErrs   int
	intentNudges int

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
	switch r.Protocol {
	case "", ProtocolTools, ProtocolText:
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
	tools, err := toolSet(r.Mode, r.AllowedTools)
	if err != nil {
		return nil, err
	}
	if r.Protocol == ProtocolText && !slices.ContainsFunc(tools, func(t *tool) bool { return t.name == ToolBash }) {
		return nil, fmt.Errorf("%w: the text protocol needs the bash tool (not available in plan mode or without it in the allowlist)", ErrInvalidRun)
	}
	s := &runState{
		a:         a,
		r:         r,
		tools:     tools,
		toolIndex: make(map[string]*tool, len(tools)),
		textMode:  r.Protocol == ProtocolText,
		start:     a.cfg.Now(),
		seen:      map[string][32]byte{},
		history:   map[string][]FileVersion{},
		rec:       newRecovery(a.cfg.Recovery.AttemptBudget),
		loops:     newLoopDetector(a.cfg.Recovery.LoopWindow, a.cfg.Recovery.LoopRepeats),
	}
	for _, t := range tools {
		s.toolIndex[t.name] = t
		s.specs = append(s.specs, t.spec())
	}
	if s.textMode {
		s.specs = nil
	}
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

// initMessages builds the system prompt (with the environment) and the
// instance message, or adopts the given history.
func (s *runState) initMessages(ctx context.Context) error {
	data := s.promptData(ctx)
	sysT := s.a.prompts.system
	if s.textMode {
		sysT = s.a.prompts.textSystem
	}
	sys, err := render(sysT, data)
	if err != nil {
		return err
	}
	env, err := render(s.a.prompts.environment, data)
	if err != nil {
		return err
	}
	inst, err := render(s.a.prompts.instance, data)
	if err != nil {
		return err
	}
	system := Message{Role: RoleSystem, Content: sys + "\n\n" + env}
	if len(s.r.History) > 0 {
		s.msgs = make([]Message, 0, len(s.r.History)+32)
		if s.r.History[0].Role != RoleSystem {
			s.msgs = append(s.msgs, system)
		}
		s.msgs = append(s.msgs, s.r.History...)
		s.pinned = min(2, len(s.msgs))
		s.traj.write(Record{Kind: RecordRunStart, TaskID: s.r.Task.ID, Model: s.r.ModelName, Protocol: s.protocol(), Mode: s.modeName()})
		for i := range s.msgs {
			s.traj.message(0, &s.msgs[i])
		}
		return nil
	}
	s.msgs = make([]Message, 0, 64)
	s.traj.write(Record{Kind: RecordRunStart, TaskID: s.r.Task.ID, Model: s.r.ModelName, Protocol: s.protocol(), Mode: s.modeName()})
	s.appendMsg(system)
	s.appendMsg(Message{Role: RoleUser, Content: inst})
	s.pinned = 2
	return nil
}

func (s *runState) protocol() string {
	if s.textMode {
		return ProtocolText
	}
	return ProtocolTools
}

func (s *runState) modeName() string {
	if s.r.Mode == ModePlan {
		return "plan"
	}
	return "normal"
}

// promptData is what the prompt templates may use.
func (s *runState) promptData(ctx context.Context) map[string]any {
	info := s.r.EnvInfo
	if info == nil {
		info = probeEnv(ctx, s.r.Env)
	}
	names := make([]string, len(s.tools))
	for i, t := range s.tools {
		names[i] = t.name
	}
	return map[string]any{
		"Task":             s.r.Task.Instruction,
		"TaskID":           s.r.Task.ID,
		"TestCommand":      s.r.Task.TestCommand,
		"Workspace":        WorkspaceRoot,
		"GitState":         info.GitState,
		"OS":               info.OS,
		"Date":             s.a.cfg.Now().Format("2006-01-02"),
		"Mode":             s.modeName(),
		"PlanMode":         s.r.Mode == ModePlan,
		"TextMode":         s.textMode,
		"Tools":            names,
		"MaxOutputChars":   s.a.cfg.MaxOutputChars,
		"CompletionMarker": CompletionMarker,
	}
}

// probeCommand asks the sandbox for its git state and platform in one exec.
const probeCommand = `b=$(git rev-parse --abbrev-ref HEAD 2>/dev/null) && { n=$(git status --porcelain 2>/dev/null | wc -l); echo "git: branch $b, $n changed files"; } || echo "git: not a git repository"; echo "os: $(uname -sm 2>/dev/null)"`

func probeEnv(ctx context.Context, env Env) *EnvInfo {
	info := &EnvInfo{GitState: "unknown", OS: runtime.GOOS}
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	res, err := env.Exec(pctx, ExecRequest{Command: probeCommand, Timeout: 10 * time.Second, MaxOutput: 4096})
	if err != nil || res.ExitCode != 0 {
		return info
	}
	for _, line := range strings.Split(string(res.Output), "\n") {
		if v, ok := strings.CutPrefix(line, "git: "); ok {
			info.GitState = strings.TrimSpace(v)
		}
		if v, ok := strings.CutPrefix(line, "os: "); ok && strings.TrimSpace(v) != "" {
			info.OS = strings.TrimSpace(v)
		}
	}
	return info
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
