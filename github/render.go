package github

import (
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/wrenchworks/wrench/task"
)

// Marker kinds: every comment and pull request body Wrench writes ends
// with an HTML comment naming the task and what the text is, so a second
// publish of the same task finds it and does not write it again.
const (
	markPR     = "pr"     // the pull request's body
	markOpened = "opened" // the issue comment linking the pull request
	markResult = "result" // the issue comment for a result without a pull request
	markFailed = "failed" // the issue comment when the pull request could not be made
	markReply  = "reply"  // the answer to a follow-up asked for on a pull request
)

// marker is the hidden line identifying a text Wrench wrote.
func marker(taskID, kind string) string {
	return fmt.Sprintf("<!-- wrench:task=%s kind=%s -->", taskID, kind)
}

// maxPatchInComment keeps a comment under GitHub's 65,536-character limit
// with room for the rest of the text.
const maxPatchInComment = 50_000

// title is the pull request's title: the issue's title, which is the
// instruction's first line.
func title(t task.Task, ref issueRef) string {
	first, _, _ := strings.Cut(strings.TrimSpace(t.Instruction), "\n")
	first = strings.TrimSpace(first)
	if first == "" {
		first = fmt.Sprintf("Resolve #%d", ref.number)
	}
	return clipLine(first, 200)
}

// commitMessage is the summary's first line as subject, the rest as body,
// and trailers naming the task and issue.
func commitMessage(t task.Task, r task.Result, ref issueRef) string {
	subject, rest, _ := strings.Cut(strings.TrimSpace(r.Summary), "\n")
	subject = strings.TrimSpace(subject)
	if subject == "" {
		subject = fmt.Sprintf("Resolve %s", ref)
	}
	var b strings.Builder
	b.WriteString(clipLine(subject, 72))
	b.WriteString("\n\n")
	if rest = strings.TrimSpace(rest); rest != "" {
		b.WriteString(rest)
		b.WriteString("\n\n")
	}
	fmt.Fprintf(&b, "Wrench-Task: %s\nIssue: %s\n", t.ID, ref)
	return b.String()
}

// prBody is the pull request's description: what Wrench did, the
// evidence that the change works, and what closes.
func (p *Publisher) prBody(t task.Task, r task.Result, ref issueRef, untested bool) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Wrench worked on #%d and proposes this change.\n\n", ref.number)
	if untested {
		b.WriteString("> [!WARNING]\n> **Not verified by tests:** this repository has no test command (`.wrench.yaml` `test:` or the server policy), so the agent's own word that it is done is all there is. Review it as you would an unchecked contribution.\n\n")
	}
	if s := strings.TrimSpace(r.Summary); s != "" {
		b.WriteString("### Summary\n\n")
		b.WriteString(s)
		b.WriteString("\n\n")
	}
	p.writeEvidence(&b, t, r)
	fmt.Fprintf(&b, "Closes #%d\n\n%s\n", ref.number, marker(t.ID, markPR))
	return b.String()
}

// writeEvidence writes the evidence table: the test command and its runs
// before and after, which tests the change fixed and broke, the setup and
// its snapshot, what the run cost, and where its trajectory is.
func (p *Publisher) writeEvidence(b *strings.Builder, t task.Task, r task.Result) {
	b.WriteString("### Evidence\n\n| | |\n|---|---|\n")
	row := func(k, v string) { fmt.Fprintf(b, "| %s | %s |\n", k, v) }
	cmd := ""
	for _, tr := range []*task.TestRun{r.TestsAfter, r.TestsBefore} {
		if tr != nil && strings.TrimSpace(tr.Command) != "" {
			cmd = tr.Command
			break
		}
	}
	if cmd == "" {
		row("Test command", "**none**: nothing checked the change")
	} else {
		row("Test command", code(cmd))
		row("Before the change", runCell(r.TestsBefore))
		row("After the change", runCell(r.TestsAfter))
		if d := diffTests(r.TestsBefore, r.TestsAfter); d.Known {
			row("Failing tests that now pass", nameList(d.Fixed, "none named"))
			row("Tests that newly fail", nameList(d.Broken, "none"))
		} else if r.TestsBefore != nil && r.TestsAfter != nil {
			row("Tests", "the output names no tests Wrench can read; exit codes above")
		}
	}
	row("Setup", setupCell(r.Setup))
	if r.Setup != nil && r.Setup.Key != "" {
		row("Environment snapshot", code(r.Setup.Key))
	}
	u := r.Usage
	row("Turns", fmt.Sprintf("%d (%d tool calls)", u.Turns, u.ToolCalls))
	row("Tokens", fmt.Sprintf("%d input, %d output", u.InputTokens, u.OutputTokens))
	row("Cost", fmt.Sprintf("$%.4f", u.CostUSD))
	if r.Timings.Total > 0 {
		row("Time", r.Timings.Total.Round(time.Second).String())
	}
	row("Trajectory", p.trajectoryCell(t, r))
	row("Task", p.taskCell(t, r))
	b.WriteString("\n")
}

// runCell is one test run's outcome.
func runCell(tr *task.TestRun) string {
	if tr == nil {
		return "not run"
	}
	return testOutcome(tr)
}

// setupCell says how the environment was prepared.
func setupCell(s *task.SetupRun) string {
	if s == nil {
		return "none recorded"
	}
	switch s.Snapshot {
	case task.SnapshotHit:
		return "snapshot hit: setup skipped"
	}
	out := "snapshot miss"
	if s.Snapshot == task.SnapshotNone {
		out = "no snapshot"
	}
	if len(s.Commands) == 0 {
		return out + ", no setup commands"
	}
	verdict := fmt.Sprintf("passed in %s", s.Duration.Round(100*time.Millisecond))
	switch {
	case s.TimedOut:
		verdict = "timed out"
	case !s.Passed:
		verdict = fmt.Sprintf("failed (exit %d)", s.ExitCode)
	}
	return fmt.Sprintf("%s, setup %s %s", out, code(strings.Join(s.Commands, " && ")), verdict)
}

// trajectoryCell links or names the trajectory artifact.
func (p *Publisher) trajectoryCell(t task.Task, r task.Result) string {
	const name = "trajectory.jsonl"
	if !slices.Contains(r.Artifacts, name) {
		return "not stored"
	}
	if p.cfg.ArtifactURL != nil {
		if u := p.cfg.ArtifactURL(t.ID, name); u != "" {
			return "[" + name + "](" + u + ")"
		}
	}
	return code(t.ID+"/"+name) + " in Wrench's artifact store"
}

// taskCell names and links the task, with its base commit.
func (p *Publisher) taskCell(t task.Task, r task.Result) string {
	id := code(t.ID)
	if p.cfg.TaskURL != nil {
		if u := p.cfg.TaskURL(t.ID); u != "" {
			id = "[" + t.ID + "](" + u + ")"
		}
	}
	if r.BaseCommit != "" {
		id += " on " + short(r.BaseCommit)
	}
	return id
}

// nameList is names as code, or none.
func nameList(names []string, none string) string {
	if len(names) == 0 {
		return none
	}
	const max = 20
	var out []string
	for i, n := range names {
		if i == max {
			out = append(out, fmt.Sprintf("and %d more", len(names)-max))
			break
		}
		out = append(out, code(n))
	}
	return strings.Join(out, ", ")
}

// code is s as inline code in a table cell.
func code(s string) string { return "`" + tableCell(s) + "`" }

// openedComment links the pull request from the issue.
func (p *Publisher) openedComment(t task.Task, r task.Result, prURL string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Wrench opened a pull request: %s\n\n", prURL)
	if after := r.TestsAfter; after != nil && after.Command != "" {
		fmt.Fprintf(&b, "`%s` %s after the change.\n\n", tableCell(after.Command), testOutcome(after))
	} else {
		b.WriteString("There is no test command, so nothing checked the change: it is labelled as untested.\n\n")
	}
	b.WriteString(p.taskLine(t, r))
	fmt.Fprintf(&b, "\n%s\n", marker(t.ID, markOpened))
	return b.String()
}

// resultComment reports a result that gets no pull request in plain
// words: what happened, the details, and the work so far as a collapsed
// patch. failure, when set, says why a pull request could not be opened.
func (p *Publisher) resultComment(t task.Task, r task.Result, failure error) string {
	var b strings.Builder
	kind := markResult
	if failure != nil {
		kind = markFailed
		fmt.Fprintf(&b, "Wrench finished the work but could not open a pull request: %s\n\n", failure)
	} else {
		b.WriteString(plainOutcome(t, r))
		b.WriteString("\n\n")
	}
	if r.Reason != "" && failure == nil {
		fmt.Fprintf(&b, "Status `%s`, reason: %s.\n\n", r.Status, oneLine(r.Reason))
	}
	if s := strings.TrimSpace(r.Summary); s != "" {
		b.WriteString("### Summary\n\n")
		b.WriteString(s)
		b.WriteString("\n\n")
	}
	writeTests(&b, r)
	writeUsage(&b, r)
	writePatch(&b, r.Patch)
	b.WriteString(p.taskLine(t, r))
	fmt.Fprintf(&b, "\n%s\n", marker(t.ID, kind))
	return b.String()
}

// writePatch attaches the work so far, collapsed.
func writePatch(b *strings.Builder, patch string) {
	if strings.TrimSpace(patch) == "" {
		b.WriteString("No changes were made.\n\n")
		return
	}
	shown, cut := clipPatch(patch, maxPatchInComment)
	lines := strings.Count(patch, "\n")
	fmt.Fprintf(b, "<details><summary>Work so far: the patch (%d lines", lines)
	if cut {
		fmt.Fprintf(b, ", first %d bytes of %d shown", len(shown), len(patch))
	}
	b.WriteString(")</summary>\n\n")
	fence := fenceFor(shown)
	fmt.Fprintf(b, "%sdiff\n%s\n%s\n\n</details>\n\n", fence, strings.TrimRight(shown, "\n"), fence)
}

// plainOutcome says in a sentence what became of the task.
func plainOutcome(t task.Task, r task.Result) string {
	reason := strings.ToLower(r.Reason)
	switch r.Status {
	case task.StateResolved:
		switch {
		case strings.TrimSpace(r.Patch) == "":
			return "Wrench finished and found nothing to change in the repository."
		case r.TestsAfter != nil && !r.TestsAfter.Passed:
			return "Wrench made a change, but the tests fail with it, so it did not open a pull request."
		}
		return "Wrench finished; this task did not ask for a pull request."
	case task.StateCancelled:
		return "Wrench stopped working on this: the task was cancelled."
	case task.StateTimedOut:
		lim := ""
		if t.Limits.Timeout > 0 {
			lim = " (" + time.Duration(t.Limits.Timeout).String() + ")"
		}
		return "Wrench ran out of time" + lim + " before it could finish."
	case task.StateRejected:
		return "Wrench could not start: the task was not valid."
	case task.StateFailed:
		switch {
		case strings.HasPrefix(reason, "deliveries exhausted"):
			return "Wrench gave up: every attempt to run this failed on Wrench's side, and it has no attempts left."
		case r.Fault == task.FaultSetup || strings.HasPrefix(reason, task.ReasonSetupFailed):
			return "Wrench could not prepare the repository's environment: its setup failed."
		case r.Fault == task.FaultInput:
			return "Wrench could not work on this: the task or the repository's configuration is invalid."
		case r.Fault == task.FaultModel:
			return "Wrench could not finish: the model failed."
		case r.Fault == task.FaultInfra:
			return "Wrench could not finish because of a problem on its side."
		}
		return "Wrench could not finish this."
	}
	switch {
	case strings.Contains(reason, "max_turns"):
		return "Wrench did not solve this: it used all its turns."
	case strings.Contains(reason, "max_cost"), strings.Contains(reason, "max_tokens"):
		return "Wrench did not solve this: it reached its spending limit."
	case strings.Contains(reason, "loop_detected"):
		return "Wrench did not solve this: it kept repeating the same step, so it was stopped."
	case strings.Contains(reason, "finished_unverified"), strings.Contains(reason, "tests_failed"):
		return "Wrench did not solve this: the tests still fail with its change."
	case strings.Contains(reason, "timeout"):
		return "Wrench did not solve this in the time it had."
	}
	return "Wrench did not solve this."
}

// taskLine names the task, links it when TaskURL is set, and gives the
// base commit.
func (p *Publisher) taskLine(t task.Task, r task.Result) string {
	id := "`" + t.ID + "`"
	if p.cfg.TaskURL != nil {
		if u := p.cfg.TaskURL(t.ID); u != "" {
			id = "[" + t.ID + "](" + u + ")"
		}
	}
	s := "Wrench task " + id
	if r.BaseCommit != "" {
		s += ", base commit " + short(r.BaseCommit)
	}
	return s + ".\n"
}

func writeTests(b *strings.Builder, r task.Result) {
	if r.TestsBefore == nil && r.TestsAfter == nil {
		return
	}
	b.WriteString("### Tests\n\n| run | command | outcome |\n|---|---|---|\n")
	for _, row := range []struct {
		name string
		run  *task.TestRun
	}{{"before", r.TestsBefore}, {"after", r.TestsAfter}} {
		if row.run == nil {
			continue
		}
		fmt.Fprintf(b, "| %s | `%s` | %s |\n", row.name, tableCell(row.run.Command), testOutcome(row.run))
	}
	b.WriteString("\n")
}

func testOutcome(tr *task.TestRun) string {
	d := tr.Duration.Round(100 * time.Millisecond)
	if tr.Passed {
		return fmt.Sprintf("passed in %s", d)
	}
	return fmt.Sprintf("failed (exit %d) in %s", tr.ExitCode, d)
}

func writeUsage(b *strings.Builder, r task.Result) {
	u := r.Usage
	if u.Turns == 0 && u.InputTokens == 0 && u.OutputTokens == 0 && r.Timings.Total == 0 {
		return
	}
	fmt.Fprintf(b, "### Usage\n\n%d turns, %d tool calls, %d input and %d output tokens, $%.4f",
		u.Turns, u.ToolCalls, u.InputTokens, u.OutputTokens, u.CostUSD)
	if r.Timings.Total > 0 {
		fmt.Fprintf(b, ", %s", r.Timings.Total.Round(time.Second))
	}
	b.WriteString(".\n\n")
}

// clipPatch keeps at most n bytes of patch, cut after a whole line.
func clipPatch(patch string, n int) (string, bool) {
	if len(patch) <= n {
		return patch, false
	}
	cut := strings.LastIndexByte(patch[:n], '\n')
	if cut <= 0 {
		cut = n
		for cut > 0 && !utf8.RuneStart(patch[cut]) {
			cut--
		}
	}
	return patch[:cut], true
}

// fenceFor returns a backtick fence longer than any backtick run in s, so
// the patch cannot close its own code block.
func fenceFor(s string) string {
	longest, run := 0, 0
	for i := 0; i < len(s); i++ {
		if s[i] == '`' {
			run++
			longest = max(longest, run)
		} else {
			run = 0
		}
	}
	return strings.Repeat("`", max(3, longest+1))
}

// clipLine cuts s to n runes.
func clipLine(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}

func oneLine(s string) string { return clipLine(strings.Join(strings.Fields(s), " "), 300) }

func tableCell(s string) string {
	return strings.NewReplacer("|", `\|`, "`", "'", "\n", " ").Replace(oneLine(s))
}
