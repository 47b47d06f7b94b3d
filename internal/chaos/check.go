package chaos

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/wrenchworks/wrench/task"
)

// leakWait bounds how long the end check waits for the deployment's
// containers and workspaces to go: the reaper sweeps every minute.
const leakWait = 90 * time.Second

// check runs the end checks into rep, once every task is final.
func (r *runner) check(ctx context.Context, rep *Report) {
	var ids []string
	keep := map[string]bool{}
	for _, rec := range r.recs {
		if rec.submitted.IsZero() || rec.id == "" {
			rep.Unsubmitted++
			continue
		}
		ids = append(ids, rec.id)
		if rec.aimed != "" || r.isReference(rec) {
			keep[rec.id] = true
		}
	}
	// Publishing follows a task's final state: wait until every delivery
	// is done with (acknowledged, or dead-lettered).
	if err := awaitIdle(ctx, r.d.q, 3*time.Minute); err != nil {
		rep.fail("the queue went idle", err.Error())
	}
	led, err := readLedger(ctx, r.d.q, ids, keep)
	if err != nil {
		rep.fail("the queue could be read", err.Error())
		led = &ledger{}
	}
	r.classifyLate(led)
	r.checkFinal(rep, led)
	r.checkDuplicates(rep)
	r.checkPublished(rep)
	r.checkSpend(rep, led)
	r.checkLeaks(ctx, rep)
	r.latency(rep)
	r.d.mu.Lock()
	rep.StartFailures = append(rep.StartFailures, r.d.startFailures...)
	r.d.mu.Unlock()
	r.resumeSavings(rep, led)
	for _, k := range Kinds {
		c := r.faults[k]
		rep.Faults = append(rep.Faults, FaultLine{Kind: k, Aimed: c.aimed, Injected: c.injected, Missed: c.missed, Notes: c.notes})
	}
	for _, rec := range r.recs {
		if rec.final != nil {
			rep.States[rec.final.State]++
		}
	}
}

// endMarker reports whether ev shows that the phase a fault of kind k
// was aimed at had ended before the process died.
func endMarker(k Kind, ev task.Event) bool {
	switch k {
	case KillClone:
		return ev.Kind == task.EventPhase && ev.Phase == "clone" && strings.TrimSpace(ev.Text) == "end"
	case KillAgent:
		return ev.Kind == task.EventToolResult
	case KillVerify:
		return ev.Kind == task.EventPhase && ev.Phase == "verify" && ev.Text == " end"
	case KillPublish:
		return ev.Kind == task.EventResult
	}
	return false
}

// classifyLate moves a kill that landed after its phase had ended (the
// killed attempt's events show the phase's end before the next attempt
// began) from injected to missed.
func (r *runner) classifyLate(led *ledger) {
	for _, rec := range r.recs {
		switch rec.aimed {
		case KillClone, KillAgent, KillVerify, KillPublish:
		default:
			continue
		}
		if rec.struckAt == 0 {
			continue
		}
		for _, ev := range led.events[rec.id] {
			if ev.Seq <= rec.struckAt {
				continue
			}
			if ev.Kind == task.EventState && ev.State == task.StateRunning {
				break // the next attempt
			}
			if endMarker(rec.aimed, ev) {
				c := r.faults[rec.aimed]
				c.injected--
				c.missed++
				c.notes = append(c.notes, "late: "+rec.id+": the phase had ended when the kill landed")
				break
			}
		}
	}
}

// checkFinal: every task is final, exactly once, with one result event.
func (r *runner) checkFinal(rep *Report, led *ledger) {
	var lost, twice, events []string
	for _, rec := range r.recs {
		if rec.submitted.IsZero() || rec.id == "" {
			continue
		}
		if rec.final == nil {
			lost = append(lost, rec.id)
		}
		if led.finals != nil && led.finals[rec.id] != 1 {
			twice = append(twice, fmt.Sprintf("%s written final %d times", rec.id, led.finals[rec.id]))
		}
		if led.results != nil && led.results[rec.id] != 1 {
			events = append(events, fmt.Sprintf("%s has %d result events", rec.id, led.results[rec.id]))
		}
	}
	rep.add("none lost: every submitted task is final", lost...)
	rep.add("every task has exactly one final state", twice...)
	rep.add("no task resolved twice to effect (one result event each)", events...)
}

// checkPublished: every GitHub task was published once: one comment on
// its issue and, resolved, one pull request with one "opened" comment.
func (r *runner) checkPublished(rep *Report) {
	var bad []string
	for _, rec := range r.recs {
		if !rec.github || rec.final == nil {
			continue
		}
		rep.GitHubTasks++
		prs, opened, comments := r.gh.effects(rec.id, rec.issue)
		want := 0
		if rec.final.State == task.StateResolved {
			want = 1
		}
		if prs != want || opened != want || comments != 1 {
			bad = append(bad, fmt.Sprintf("%s (%s, fault %q): %d pull requests, %d comments (%d saying opened); want %d, 1, %d",
				rec.id, rec.final.State, rec.aimed, prs, comments, opened, want, want))
		}
		rep.PullRequests += prs
	}
	rep.add("no task published twice to GitHub (one pull request, one comment)", bad...)
}

// checkDuplicates: a submission of a known id never makes a new task.
func (r *runner) checkDuplicates(rep *Report) {
	var bad []string
	for _, rec := range r.recs {
		if rec.firstDup {
			bad = append(bad, rec.id+": its first submission was answered as a duplicate")
		}
		if rec.newDups > 0 {
			bad = append(bad, fmt.Sprintf("%s: %d of %d resubmissions answered as new", rec.id, rec.newDups, rec.resubmits))
		}
	}
	rep.add("duplicate submissions are answered as duplicates", bad...)
}

// checkSpend: no task spent above its caps, by its result (all attempts)
// or by the usage events of every attempt.
func (r *runner) checkSpend(rep *Report, led *ledger) {
	var over []string
	for _, rec := range r.recs {
		if rec.final == nil {
			continue
		}
		var u task.Usage
		if rec.final.Result != nil {
			u = rec.final.Result.Usage
		}
		if s, ok := led.spent[rec.id]; ok && s.InputTokens+s.OutputTokens > u.InputTokens+u.OutputTokens {
			u = s
		}
		tokens := u.InputTokens + u.OutputTokens
		if rec.limits.MaxTokens > 0 && tokens > rec.limits.MaxTokens || rec.limits.MaxCostUSD > 0 && u.CostUSD > rec.limits.MaxCostUSD {
			over = append(over, fmt.Sprintf("%s spent %d tokens, %.4f USD; caps %d, %.4f", rec.id, tokens, u.CostUSD,
				rec.limits.MaxTokens, rec.limits.MaxCostUSD))
		}
		rep.TotalTokens += tokens
		rep.TotalCostUSD += u.CostUSD
	}
	rep.add("no task's spend above its cap", over...)
}

// checkLeaks: once every task is final, the deployment's containers and
// workspaces go (within a reaper sweep), and none is left after the
// processes stop.
func (r *runner) checkLeaks(ctx context.Context, rep *Report) {
	t0 := time.Now()
	var boxes []string
	var spaces int
	var names []string
	for {
		boxes, _ = containers(ctx, r.cfg.Deployment, "")
		spaces, names = r.d.workspaces()
		if len(boxes) == 0 && spaces == 0 || time.Since(t0) > leakWait || ctx.Err() != nil {
			break
		}
		sleep(ctx, time.Second)
	}
	rep.LeakWait = time.Since(t0)
	stopErr := r.d.stop()
	after, _ := containers(context.Background(), r.cfg.Deployment, "")
	afterSpaces, afterNames := r.d.workspaces()
	var bad []string
	if len(boxes) > 0 {
		bad = append(bad, fmt.Sprintf("%d containers left %s after the last task: %s", len(boxes), leakWait, strings.Join(boxes, " ")))
	}
	if spaces > 0 {
		bad = append(bad, fmt.Sprintf("%d workspaces left %s after the last task: %s", spaces, leakWait, strings.Join(names, " ")))
	}
	if len(after) > 0 || afterSpaces > 0 {
		bad = append(bad, fmt.Sprintf("after the processes stopped: %d containers, %d workspaces (%s)", len(after), afterSpaces, strings.Join(afterNames, " ")))
	}
	rep.add("zero containers and workspaces left for the deployment", bad...)
	if stopErr != nil {
		rep.add("every process stops cleanly on SIGTERM", stopErr.Error())
	}
}

// latency sets the end-to-end latencies: submission to the result's
// finish.
func (r *runner) latency(rep *Report) {
	var ds []time.Duration
	var slow []Slow
	for _, rec := range r.recs {
		if rec.final == nil {
			continue
		}
		end := rec.final.UpdatedAt
		if rec.final.Result != nil && !rec.final.Result.FinishedAt.IsZero() {
			end = rec.final.Result.FinishedAt
		}
		d := end.Sub(rec.submitted)
		ds = append(ds, d)
		slow = append(slow, Slow{ID: rec.id, Shape: string(rec.shape), Fault: rec.aimed, Attempt: rec.final.Attempt, Latency: d})
	}
	if len(ds) == 0 {
		return
	}
	slices.Sort(ds)
	rep.P50, rep.P99, rep.Max = quantile(ds, 0.50), quantile(ds, 0.99), ds[len(ds)-1]
	slices.SortFunc(slow, func(a, b Slow) int { return int(b.Latency - a.Latency) })
	rep.Slowest = slow[:min(5, len(slow))]
}

func quantile(sorted []time.Duration, q float64) time.Duration {
	i := int(q*float64(len(sorted)) + 0.5)
	return sorted[min(max(i-1, 0), len(sorted)-1)]
}

// resumeSavings measures the tokens resuming saved: starting over would
// have paid the model calls before each resumed task's save point again;
// what they cost is read from the usage events of a clean run of the
// same script (a task of the same shape that no fault touched, resolved
// on its first attempt).
func (r *runner) resumeSavings(rep *Report, led *ledger) {
	perCall := map[shape][]int64{}
	for _, rec := range r.recs {
		if !r.isReference(rec) || rec.final == nil || rec.final.Attempt != 1 || rec.final.State != task.StateResolved {
			continue
		}
		for _, ev := range led.events[rec.id] {
			if ev.Kind == task.EventUsage && ev.Usage != nil {
				perCall[rec.shape] = append(perCall[rec.shape], ev.Usage.InputTokens+ev.Usage.OutputTokens)
			}
		}
	}
	for _, rec := range r.recs {
		if rec.final == nil || rec.final.Result == nil || rec.final.Result.Resumed == "" {
			continue
		}
		rep.Resumed++
		res := rec.final.Result
		rep.ResumedTokens += res.Usage.InputTokens + res.Usage.OutputTokens
		var turn int
		if _, err := fmt.Sscanf(res.Resumed, "resumed at turn %d", &turn); err != nil {
			continue
		}
		calls := perCall[rec.shape]
		if len(calls) < turn {
			rep.SavedUnknown++
			continue
		}
		for _, n := range calls[:turn] {
			rep.SavedTokens += n
		}
	}
}

// isReference reports whether rec is the first task of its shape that no
// fault was aimed at: its events are kept as a clean run's.
func (r *runner) isReference(rec *record) bool {
	for _, o := range r.recs {
		if o.aimed == "" && o.shape == rec.shape {
			return o == rec
		}
	}
	return false
}
