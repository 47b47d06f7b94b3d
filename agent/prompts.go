package agent

import (
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"text/template"
)

//go:embed prompts/*.tmpl
var defaultPrompts embed.FS

// CompletionMarker ends a text-mode run when it is the first line of a
// command's output; what follows it is the final output.
const CompletionMarker = "COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"

// PromptSet holds prompt templates (Go text/template). An empty field keeps
// the built-in template. Templates are executed with missingkey=error, so a
// template that names an unknown key fails the run instead of rendering
// "<no value>". The keys are:
//
//	Task, TaskID, TestCommand, Workspace, GitState, OS, Date, Mode,
//	PlanMode, PlanFirst, SubAgent, TextMode, Tools, HasTool (tool name ->
//	offered), Diagnostics, MaxOutputChars, CompletionMarker,
//	ProjectInstructions ([]ProjectFile), Mentions ([]Mention; filled for
//	Instance only)
//
// and, for Compaction only, Transcript. The system message is System (or
// TextSystem), Project, Environment and Append, in that order, blank
// lines between the non-empty ones.
type PromptSet struct {
	// System is the role and rules for tool-calling runs.
	System string
	// TextSystem replaces System for text-protocol runs.
	TextSystem string
	// Instance is the first user message: the task and the recommended
	// workflow.
	Instance string
	// Project renders the repository's instruction files
	// (Config.ProjectInstructions) into the system prompt.
	Project string
	// Environment is appended to the system prompt: workspace, git state,
	// platform, date, test command.
	Environment string
	// Append is the operator's layer, last in the system prompt; the
	// built-in one is empty.
	Append string
	// Compaction asks the model to summarise older turns.
	Compaction string
}

// The file names LoadPromptSet reads.
var promptFiles = map[string]func(*PromptSet) *string{
	"system.tmpl":      func(p *PromptSet) *string { return &p.System },
	"text_system.tmpl": func(p *PromptSet) *string { return &p.TextSystem },
	"instance.tmpl":    func(p *PromptSet) *string { return &p.Instance },
	"environment.tmpl": func(p *PromptSet) *string { return &p.Environment },
	"project.tmpl":     func(p *PromptSet) *string { return &p.Project },
	"append.tmpl":      func(p *PromptSet) *string { return &p.Append },
	"compact.tmpl":     func(p *PromptSet) *string { return &p.Compaction },
}

// LoadPromptSet reads overrides from fsys: system.tmpl, text_system.tmpl,
// instance.tmpl, project.tmpl, environment.tmpl, append.tmpl and
// compact.tmpl, each optional. Use
// os.DirFS(dir) for a directory of overrides.
func LoadPromptSet(fsys fs.FS) (PromptSet, error) {
	var p PromptSet
	for name, field := range promptFiles {
		b, err := fs.ReadFile(fsys, name)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return PromptSet{}, fmt.Errorf("read prompt %s: %w", name, err)
		}
		*field(&p) = string(b)
	}
	return p, nil
}

// prompts are the parsed templates.
type prompts struct {
	system, textSystem, instance, project, environment, append, compaction *template.Template
}

func parsePrompts(set PromptSet) (*prompts, error) {
	var p prompts
	for _, t := range []struct {
		name, file, override string
		dst                  **template.Template
	}{
		{"system", "system.tmpl", set.System, &p.system},
		{"text_system", "text_system.tmpl", set.TextSystem, &p.textSystem},
		{"instance", "instance.tmpl", set.Instance, &p.instance},
		{"project", "project.tmpl", set.Project, &p.project},
		{"environment", "environment.tmpl", set.Environment, &p.environment},
		{"append", "append.tmpl", set.Append, &p.append},
		{"compaction", "compact.tmpl", set.Compaction, &p.compaction},
	} {
		text := t.override
		if text == "" {
			b, err := defaultPrompts.ReadFile("prompts/" + t.file)
			if err != nil {
				return nil, fmt.Errorf("built-in prompt %s: %w", t.file, err)
			}
			text = string(b)
		}
		tmpl, err := template.New(t.name).Option("missingkey=error").Parse(text)
		if err != nil {
			return nil, fmt.Errorf("%w: prompt %s: %w", ErrInvalidRun, t.name, err)
		}
		*t.dst = tmpl
	}
	return &p, nil
}

// render executes t with data; a missing key is an error.
func render(t *template.Template, data map[string]any) (string, error) {
	var b strings.Builder
	if err := t.Execute(&b, data); err != nil {
		return "", fmt.Errorf("%w: render prompt %s: %w", ErrInvalidRun, t.Name(), err)
	}
	return strings.TrimRight(b.String(), "\n"), nil
}

// samplePromptData is data with every key a template may use (see
// PromptSet), the booleans all set to on: check renders each template with
// it and with its zero-valued twin, so a template that names an unknown key
// is refused when the Agent is made, not by every run.
func samplePromptData(on bool) map[string]any {
	str := func(s string) string {
		if on {
			return s
		}
		return ""
	}
	var (
		files    []ProjectFile
		mentions []Mention
		tools    []string
	)
	if on {
		files = []ProjectFile{{Path: "AGENTS.md", Content: "Run make test."}}
		mentions = []Mention{{Path: "calc.go", Content: "package calc\n"}, {Path: "dir", IsDir: true, Content: "a.go\n", Truncated: true}}
		tools = ToolNames()
	}
	has := map[string]bool{}
	for _, n := range tools {
		has[n] = true
	}
	return map[string]any{
		"Task": str("Fix the bug."), "TaskID": str("t-1"), "TestCommand": str("go test ./..."),
		"Workspace": "/workspace", "GitState": str("branch main, clean"), "OS": str("Linux x86_64"),
		"Date": "2006-01-02", "Mode": str("plan"), "PlanMode": on, "PlanFirst": on, "SubAgent": on,
		"TextMode": on, "Tools": tools, "HasTool": has, "Diagnostics": on, "MaxOutputChars": 10000,
		"CompletionMarker": CompletionMarker, "ProjectInstructions": files, "Mentions": mentions,
		"Transcript": str("user: hello"),
	}
}

// check renders every template with sample data (every key, booleans on
// and off); an error names the template and the key it lacks.
func (p *prompts) check() error {
	for _, t := range []*template.Template{p.system, p.textSystem, p.instance, p.project, p.environment, p.append, p.compaction} {
		for _, on := range []bool{true, false} {
			if _, err := render(t, samplePromptData(on)); err != nil {
				return err
			}
		}
	}
	return nil
}
