package github

import (
	"fmt"
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

// prBody is the pull request's description.
func (p *Publisher) prBody(t task.Task, r task.Result, ref issueRef) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Wrench worked on #%d and proposes this change.\n\n", ref.number)
	if s := strings.TrimSpace(r.Summary); s != "" {
		b.WriteString("### Summary\n\n")
		b.WriteString(s)
		b.WriteString("\n\n")
	}
	writeTests(&b, r)
	writeUsage(&b, r)
	b.WriteString(p.taskLine(t, r))
	fmt.Fprintf(&b, "\nCloses #%d\n\n%s\n", ref.number, marker(t.ID, markPR))
	return b.String()
}

// openedComment links the pull request from the issue.
func (p *Publisher) openedComment(t task.Task, r task.Result, prURL string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Wrench opened a pull request: %s\n\n", prURL)
	if after := r.TestsAfter; after != nil {
		fmt.Fprintf(&b, "Tests after the change: %s.\n\n", testOutcome(after))
	}
	b.WriteString(p.taskLine(t, r))
	fmt.Fprintf(&b, "\n%s\n", marker(t.ID, markOpened))
	return b.String()
}

// resultComment reports a result that gets no pull request: its status,
// reason, summary, tests and (truncated) patch. failure, when set, says
// why a pull request could not be opened.
func (p *Publisher) resultComment(t task.Task, r task.Result, failure error) string {
	var b strings.Builder
	kind := markResult
	switch {
	case failure != nil:
		kind = markFailed
		fmt.Fprintf(&b, "Wrench resolved this issue but could not open a pull request: %s\n\n", failure)
	case r.Status == task.StateResolved && strings.TrimSpace(r.Patch) == "":
		b.WriteString("Wrench finished: **resolved**, with no changes to the repository.\n\n")
	default:
		fmt.Fprintf(&b, "Wrench finished: **%s**", r.Status)
		if r.Reason != "" {
			fmt.Fprintf(&b, " (%s)", oneLine(r.Reason))
		}
		b.WriteString(".\n\n")
	}
	if s := strings.TrimSpace(r.Summary); s != "" {
		b.WriteString("### Summary\n\n")
		b.WriteString(s)
		b.WriteString("\n\n")
	}
	writeTests(&b, r)
	writeUsage(&b, r)
	if patch := strings.TrimSpace(r.Patch); patch != "" {
		shown, cut := clipPatch(r.Patch, maxPatchInComment)
		lines := strings.Count(r.Patch, "\n")
		fmt.Fprintf(&b, "<details><summary>Patch (%d lines", lines)
		if cut {
			fmt.Fprintf(&b, ", first %d bytes of %d shown", len(shown), len(r.Patch))
		}
		b.WriteString(")</summary>\n\n")
		fence := fenceFor(shown)
		fmt.Fprintf(&b, "%sdiff\n%s\n%s\n\n</details>\n\n", fence, strings.TrimRight(shown, "\n"), fence)
	}
	b.WriteString(p.taskLine(t, r))
	fmt.Fprintf(&b, "\n%s\n", marker(t.ID, kind))
	return b.String()
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
