package agent

import (
	"context"
	"errors"
	"io/fs"
	"runtime"
	"strings"
	"text/template"
	"time"

	"github.com/wrenchworks/wrench/sandbox"
	"github.com/wrenchworks/wrench/task"
)

// The system prompt has layers, each a
// template, joined by blank lines:
//
//  1. role and rules: system.tmpl (text_system.tmpl for the text protocol);
//  2. project: the repository's own instructions (Config.ProjectInstructions,
//     AGENTS.md by default) through project.tmpl;
//  3. environment: environment.tmpl (workspace, git state, platform, date,
//     test command);
//  4. operator: append.tmpl (PromptSet.Append, empty by default).
//
// The first user message is instance.tmpl: the task, the files it
// @-mentions, and the recommended workflow.

// maxProjectChars caps one project instructions file.
const maxProjectChars = 8000

// maxMentions caps how many @-mentioned paths are read.
const maxMentions = 10

// ProjectFile is one project instructions file, for project.tmpl.
type ProjectFile struct {
	Path    string
	Content string
}

// Mention is one @-mentioned path of the task, for instance.tmpl: a file's
// content or a directory's listing.
type Mention struct {
	Path  string
	IsDir bool
	// Content is the file's text (or the listing), possibly cut.
	Content string
	// Truncated says Content is only the start of the file.
	Truncated bool
}

// initMessages builds the system prompt and the instance message, or adopts
// the given history.
func (s *runState) initMessages(ctx context.Context) error {
	s.envInfo = s.r.EnvInfo
	if s.envInfo == nil {
		s.envInfo = probeEnv(ctx, s.r.Env)
	}
	data := s.promptData()
	data["ProjectInstructions"] = s.projectFiles(ctx)
	system, err := s.systemPrompt(data)
	if err != nil {
		return err
	}
	s.traj.write(Record{Kind: RecordRunStart, TaskID: s.r.Task.ID, BaseCommit: s.r.BaseCommit, Model: s.r.ModelName, Protocol: string(s.protocol()), Mode: s.modeName()})
	if len(s.history0()) > 0 {
		s.adoptHistory(Message{Role: RoleSystem, Content: system})
		return nil
	}
	data["Mentions"] = s.mentions(ctx, s.r.Task.Instruction)
	inst, err := render(s.a.prompts.instance, data)
	if err != nil {
		return err
	}
	s.msgs = make([]Message, 0, 64)
	s.appendMsg(Message{Role: RoleSystem, Content: system})
	s.appendMsg(Message{Role: RoleUser, Content: inst})
	s.pinned = 2
	return nil
}

// systemPrompt renders the layers of the system prompt.
func (s *runState) systemPrompt(data map[string]any) (string, error) {
	base := s.a.prompts.system
	if s.textMode {
		base = s.a.prompts.textSystem
	}
	var parts []string
	for _, t := range []*template.Template{base, s.a.prompts.project, s.a.prompts.environment, s.a.prompts.append} {
		text, err := render(t, data)
		if err != nil {
			return "", err
		}
		if strings.TrimSpace(text) != "" {
			parts = append(parts, text)
		}
	}
	return strings.Join(parts, "\n\n"), nil
}

// adoptHistory continues an earlier conversation. A history that holds a
// summary message (compaction) restarts from the latest one: the system
// prompt and the task, then the summary and what follows it (see
// agent/compact.go).
func (s *runState) adoptHistory(system Message) {
	h := s.history0()
	s.msgs = make([]Message, 0, len(h)+32)
	if h[0].Role != RoleSystem {
		s.msgs = append(s.msgs, system)
	}
	s.msgs = append(s.msgs, h...)
	s.pinned = min(2, len(s.msgs))
	for i := len(s.msgs) - 1; i > s.pinned; i-- {
		if s.msgs[i].Summary {
			s.msgs = append(s.msgs[:s.pinned], s.msgs[i:]...)
			break
		}
	}
	for i := range s.msgs {
		s.traj.message(0, &s.msgs[i])
	}
}

// history0 is the conversation the run continues: a save point's, or
// Run.History.
func (s *runState) history0() []Message {
	if s.r.Resume != nil && len(s.r.Resume.Messages) > 0 {
		return s.r.Resume.Messages
	}
	return s.r.History
}

func (s *runState) protocol() task.Protocol {
	if s.textMode {
		return task.ProtocolText
	}
	return task.ProtocolTools
}

func (s *runState) modeName() string {
	switch {
	case s.r.Mode == task.ModePlan:
		return "plan"
	case s.planning:
		return "planning"
	}
	return "normal"
}

// promptData is what the prompt templates may use.
func (s *runState) promptData() map[string]any {
	names := s.tools.names()
	has := make(map[string]bool, len(names))
	for _, n := range names {
		has[n] = true
	}
	if s.planning { // the system prompt describes both phases
		all, _ := s.a.toolSet(s.r.Mode, s.r.AllowedTools)
		for _, t := range all {
			has[t.name] = true
		}
	}
	return map[string]any{
		"Task":                s.r.Task.Instruction,
		"TaskID":              s.r.Task.ID,
		"TestCommand":         s.r.Task.TestCommand,
		"Workspace":           sandbox.WorkDir,
		"GitState":            s.envInfo.GitState,
		"OS":                  s.envInfo.OS,
		"Date":                s.a.cfg.Now().Format("2006-01-02"),
		"Mode":                s.modeName(),
		"PlanMode":            s.r.Mode == task.ModePlan,
		"PlanFirst":           s.r.PlanFirst,
		"SubAgent":            s.r.subAgent,
		"TextMode":            s.textMode,
		"Tools":               names,
		"HasTool":             has,
		"Diagnostics":         s.a.cfg.Diagnostics.enabled() && !s.textMode,
		"MaxOutputChars":      s.a.cfg.MaxOutputChars,
		"CompletionMarker":    CompletionMarker,
		"ProjectInstructions": []ProjectFile(nil),
		"Mentions":            []Mention(nil),
	}
}

// projectFiles reads the repository's instruction files (missing ones are
// skipped; a failure to read one is logged).
func (s *runState) projectFiles(ctx context.Context) []ProjectFile {
	if s.a.cfg.NoProjectInstructions {
		return nil
	}
	var out []ProjectFile
	names := s.a.cfg.ProjectInstructions
	if len(s.r.ProjectInstructions) > 0 {
		names = s.r.ProjectInstructions
	}
	for _, name := range names {
		p, err := cleanPath(name)
		if err != nil {
			continue
		}
		b, err := s.r.Env.ReadFile(ctx, p)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			continue
		case err != nil:
			s.logEvent("project instructions %s not read: %v", p, err)
			continue
		}
		text := strings.TrimSpace(string(b))
		if text == "" {
			continue
		}
		if len(text) > maxProjectChars {
			text = cutHead(text, maxProjectChars) + "\n[... cut: the file is longer; view " + p + " for the rest]"
		}
		out = append(out, ProjectFile{Path: p, Content: text})
	}
	return out
}

// probeCommand asks the sandbox for its git state and platform in one exec.
const probeCommand = `b=$(git rev-parse --abbrev-ref HEAD 2>/dev/null) && { n=$(git status --porcelain 2>/dev/null | wc -l); echo "git: branch $b, $n changed files"; } || echo "git: not a git repository"; echo "os: $(uname -sm 2>/dev/null)"`

func probeEnv(ctx context.Context, env sandbox.Env) *EnvInfo {
	info := &EnvInfo{GitState: "unknown", OS: runtime.GOOS}
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	res, err := env.Exec(pctx, sandbox.ExecRequest{Command: probeCommand, Timeout: 10 * time.Second, MaxOutput: 4096})
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
