package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/wrenchworks/wrench/api"
	"github.com/wrenchworks/wrench/policy"
	"github.com/wrenchworks/wrench/queue"
	"github.com/wrenchworks/wrench/task"
)

// budgetScript appends s1…s8 to log.txt, one model call each, then reads
// it back and finishes once every line is there: ten model calls, each
// a little dearer than the last (the conversation grows).
const budgetScript = `steps:
  - tool_calls: [{name: bash, arguments: {command: "echo s1 >> log.txt"}}]
  - tool_calls: [{name: bash, arguments: {command: "echo s2 >> log.txt"}}]
  - tool_calls: [{name: bash, arguments: {command: "echo s3 >> log.txt"}}]
  - tool_calls: [{name: bash, arguments: {command: "echo s4 >> log.txt"}}]
  - tool_calls: [{name: bash, arguments: {command: "echo s5 >> log.txt"}}]
  - tool_calls: [{name: bash, arguments: {command: "echo s6 >> log.txt"}}]
  - tool_calls: [{name: bash, arguments: {command: "echo s7 >> log.txt"}}]
  - tool_calls: [{name: bash, arguments: {command: "echo s8 >> log.txt"}}]
  - tool_calls: [{name: bash, arguments: {command: "cat log.txt"}}]
  - expect_observation: "s1\\ns2\\ns3\\ns4\\ns5\\ns6\\ns7\\ns8$"
    tool_calls: [{name: finish, arguments: {summary: "Logged eight lines."}}]
`

// budgetCalls is how many model calls budgetScript's task makes.
const budgetCalls = 10

// budgetPrices price the scripted model ($10 per million tokens in and
// out): a call of budgetScript costs about a cent and a half.
const budgetPrices = "scripted: {input_per_mtok: 10, output_per_mtok: 10}\n"

// budgetDeployment is serve (API and sweeper only) and workers on its
// NATS, all with one policy file (which the test rewrites and reloads
// with SIGHUP) and the budget prices.
type budgetDeployment struct {
	serve    *wrenchProc
	workers  []*wrenchProc
	client   *api.Client
	apiURL   string
	metrics  []string // the workers' /metrics URLs
	policy   string
	conn     *queue.Conn
	repo     string
	script   string
	apiEnv   []string
	ctxLimit context.Context
}

func startBudgetDeployment(t *testing.T, ctx context.Context, dailyUSD float64, workers int) *budgetDeployment {
	t.Helper()
	requireImage(t)
	deployment := fmt.Sprintf("e2e-budget-%d", time.Now().UnixNano())
	t.Cleanup(func() { removeContainers(deployment) })
	dir := t.TempDir()
	b := &budgetDeployment{policy: filepath.Join(dir, "policy.yaml"), ctxLimit: ctx}
	b.setCap(t, dailyUSD)
	prices := filepath.Join(dir, "prices.yaml")
	b.script = filepath.Join(dir, "budget.yaml")
	for f, body := range map[string]string{prices: budgetPrices, b.script: budgetScript} {
		if err := os.WriteFile(f, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var natsURL, natsSeed string
	b.serve, b.apiURL, natsURL, natsSeed = startServeProc(t, ctx, "--slots", "0", "--data-dir", t.TempDir(), "--deployment", deployment, "--policy", b.policy)
	for i := range workers {
		id := fmt.Sprintf("w-%d", i+1)
		p := startProc(t, id, "worker", "--nats", natsURL, "--nats-nkey", natsSeed, "--slots", "2", "--http", "127.0.0.1:0",
			"--data-dir", t.TempDir(), "--deployment", deployment, "--worker-id", id, "--ack-wait", "3s", "--log-level", "info",
			"--policy", b.policy, "--prices", prices, "--max-output-tokens", "200")
		b.metrics = append(b.metrics, strings.TrimSpace(p.line(t, ctx, "wrench worker: metrics on ")))
		p.line(t, ctx, "wrench worker: "+id+" joined ")
		b.workers = append(b.workers, p)
	}
	signIn, err := nats.NkeyOptionFromSeed(natsSeed)
	if err != nil {
		t.Fatal(err)
	}
	if b.conn, err = queue.Connect(ctx, queue.Config{URL: natsURL, ConnectOptions: []nats.Option{signIn}}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.conn.Close)
	b.client = api.NewClient(b.apiURL, "")
	b.apiEnv = []string{"WRENCH_SERVER=" + b.apiURL}
	b.repo, _ = helloRepo(t, 0)
	return b
}

// setCap writes the policy with a repository budget of dailyUSD.
func (b *budgetDeployment) setCap(t *testing.T, dailyUSD float64) {
	t.Helper()
	body := fmt.Sprintf("defaults:\n  budget: {daily_usd: %g}\n", dailyUSD)
	if err := os.WriteFile(b.policy, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}

// reload makes serve and the workers load the policy again.
func (b *budgetDeployment) reload(t *testing.T) {
	t.Helper()
	for _, p := range append([]*wrenchProc{b.serve}, b.workers...) {
		if err := p.cmd.Process.Signal(syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
	}
}

func (b *budgetDeployment) submit(t *testing.T, id string) {
	t.Helper()
	tk := helloTask(id, b.repo, b.script)
	tk.Instruction = "Log eight lines."
	if _, _, err := b.client.Submit(b.ctxLimit, tk); err != nil {
		t.Fatal(err)
	}
}

// waitFor polls task id's status until cond holds.
func (b *budgetDeployment) waitFor(t *testing.T, id, what string, cond func(task.Status) bool) task.Status {
	t.Helper()
	for {
		st, err := b.client.Status(b.ctxLimit, id)
		if err == nil && cond(st) {
			return st
		}
		select {
		case <-b.ctxLimit.Done():
			t.Fatalf("%s never %s (last: %+v, %v)", id, what, st, err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// spent is what the repository's account spent and holds today.
func (b *budgetDeployment) spent(t *testing.T) float64 {
	t.Helper()
	a := task.BudgetAccount{Scope: task.BudgetRepository, Name: policy.RepositoryName(b.repo)}
	bal, err := b.conn.Budgets().Balance(b.ctxLimit, task.BudgetDay(time.Now()), a)
	if err != nil {
		t.Fatal(err)
	}
	return bal.SpentUSD + bal.HeldUSD
}

// metric returns the value of series (name{labels}) summed over urls.
func metric(t *testing.T, urls []string, series string) float64 {
	t.Helper()
	sum := 0.0
	for _, u := range urls {
		resp, err := http.Get(u)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(series) + ` (\S+)$`).FindSubmatch(body)
		if m == nil {
			t.Fatalf("%s has no %s", u, series)
		}
		v, _ := strconv.ParseFloat(string(m[1]), 64)
		sum += v
	}
	return sum
}

// TestBudgetPausesAndContinues: under a repository budget of $0.06 a
// ten-call task pauses before the call that would cross it: state paused
// with reason budget, its work kept (patch and save point), nothing
// redelivered, the day's spend within the cap. A second task on the
// repository pauses too and is cancelled. `wrench resume` takes the first
// one up from its save point, where it pauses again. Raising the cap and
// sending SIGHUP lets serve's sweeper resume it; it finishes, and no model
// call was made twice: the calls and the cost of its three attempts add up
// to one run's, which is what the ledger says the day spent.
func TestBudgetPausesAndContinues(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	const capUSD = 0.06
	b := startBudgetDeployment(t, ctx, capUSD, 1)

	b.submit(t, "t-budget")
	st := b.waitFor(t, "t-budget", "paused", func(st task.Status) bool { return st.State == task.StatePaused })
	p := st.Pause
	if st.Reason != task.ReasonBudget || p == nil || p.Account.Scope != task.BudgetRepository || p.Account.DailyUSD != capUSD ||
		st.Spent == nil || st.Spent.ModelCalls == 0 || st.Spent.ModelCalls >= budgetCalls {
		t.Fatalf("paused: %+v (pause %+v, spent %+v)", st, p, st.Spent)
	}
	firstCalls := st.Spent.ModelCalls
	if spent := b.spent(t); spent > capUSD || spent+p.NeedUSD <= capUSD || spent < st.Spent.CostUSD {
		t.Fatalf("ledger: $%.6f spent of $%.2f; the refused call needed $%.6f; the task spent $%.6f", spent, capUSD, p.NeedUSD, st.Spent.CostUSD)
	}
	patch, err := b.client.Artifact(ctx, "t-budget", "patch.diff")
	if err != nil || !strings.Contains(string(patch), "+s1") {
		t.Fatalf("the paused task's patch: %q %v", patch, err)
	}
	if _, err := b.client.Artifact(ctx, "t-budget", resumeArtifact); err != nil {
		t.Fatalf("no save point: %v", err)
	}
	out, _, code := runWrench(t, ctx, b.apiEnv, "status", "t-budget")
	if code != exitOK || !strings.Contains(out, "t-budget  paused (budget)") || !strings.Contains(out, "paused: repository ") {
		t.Errorf("wrench status: exit %d:\n%s", code, out)
	}
	time.Sleep(4 * time.Second) // past --ack-wait: a delivery left unacked would come back now
	if st, _ := b.client.Status(ctx, "t-budget"); st.State != task.StatePaused || st.Attempt != 1 {
		t.Fatalf("after the ack wait: %s on attempt %d", st.State, st.Attempt)
	}

	// Another task on the repository pauses before any call fits; it is
	// cancelled.
	b.submit(t, "t-budget-2")
	b.waitFor(t, "t-budget-2", "paused", func(st task.Status) bool { return st.State == task.StatePaused })
	if out, errOut, code := runWrench(t, ctx, b.apiEnv, "cancel", "t-budget-2"); code != exitOK || !strings.Contains(out, "t-budget-2 cancelled") {
		t.Fatalf("wrench cancel: exit %d: %s%s", code, out, errOut)
	}
	if st, _ := b.client.Status(ctx, "t-budget-2"); st.State != task.StateCancelled || st.Result == nil || st.Result.Reason != "cancelled while paused" {
		t.Fatalf("cancelled paused task: %+v", st)
	}

	// By hand, with the cap unchanged: it continues from its save point,
	// whose next call does not fit either.
	if out, errOut, code := runWrench(t, ctx, b.apiEnv, "resume", "t-budget"); code != exitOK || !strings.Contains(out, "t-budget is queued again") {
		t.Fatalf("wrench resume: exit %d: %s%s", code, out, errOut)
	}
	st = b.waitFor(t, "t-budget", "paused again", func(st task.Status) bool { return st.State == task.StatePaused && st.Attempt == 2 })
	if st.Spent.ModelCalls != firstCalls {
		t.Errorf("the resumed attempt made %d model calls over the cap", st.Spent.ModelCalls-firstCalls)
	}
	if _, errOut, code := runWrench(t, ctx, b.apiEnv, "resume", "t-budget-2"); code != exitBadInput || !strings.Contains(errOut, "only a paused task can be resumed") {
		t.Errorf("resuming a cancelled task: exit %d: %s", code, errOut)
	}

	// The cap raised: the sweeper resumes it, and it finishes.
	b.setCap(t, 1)
	b.reload(t)
	st = b.waitFor(t, "t-budget", "final", func(st task.Status) bool { return st.State.Final() })
	res := st.Result
	if st.State != task.StateResolved || res.Attempt != 3 || !strings.Contains(res.Patch, "+s8") {
		t.Fatalf("result %+v", res)
	}
	want := fmt.Sprintf("resumed at turn %d after a budget pause (its budget allows it again)", firstCalls)
	if res.Resumed != want {
		t.Errorf("resumed %q, want %q", res.Resumed, want)
	}
	if res.Usage.ModelCalls != budgetCalls || res.Usage.Turns != budgetCalls {
		t.Errorf("%d model calls and %d turns over three attempts, want %d: none made twice", res.Usage.ModelCalls, res.Usage.Turns, budgetCalls)
	}
	spent := b.spent(t)
	if d := spent - res.Usage.CostUSD; d < -1e-9 || d > 2e-5 {
		t.Errorf("the ledger says $%.6f spent today, the result $%.6f", spent, res.Usage.CostUSD)
	}
	refused := metric(t, b.metrics, `wrench_budget_refusals_total{scope="repository"}`)
	paused := metric(t, b.metrics, `wrench_tasks_paused_total{reason="budget"}`)
	counted := metric(t, b.metrics, `wrench_budget_spent_usd_total{scope="repository"}`)
	resumed := metric(t, []string{b.apiURL + "/metrics"}, `wrench_tasks_resumed_total{how="budget"}`)
	byHand := metric(t, []string{b.apiURL + "/metrics"}, `wrench_tasks_resumed_total{how="manual"}`)
	if refused < 3 || paused != 3 || resumed != 1 || byHand != 1 || counted < res.Usage.CostUSD-1e-9 || counted > spent+1e-9 {
		t.Errorf("metrics: %g refusals, %g pauses, %g resumed by the sweeper and %g by hand, $%g counted", refused, paused, resumed, byHand, counted)
	}
	t.Logf("cap $%.2f: paused after %d of %d calls ($%.4f spent, the next needing up to $%.4f); finished at $%.4f over 3 attempts, %d calls",
		capUSD, firstCalls, budgetCalls, p.SpentUSD, p.NeedUSD, res.Usage.CostUSD, res.Usage.ModelCalls)
}

// TestBudgetHoldsAcrossWorkers: two worker processes, two slots each,
// race four tasks on one repository whose budget is $0.06, less than one
// of them need. Every model call is reserved on the shared ledger first:
// the tasks pause once it is spent, and what they spent together stays
// within the cap however their calls interleave. Raised, every task
// finishes.
func TestBudgetHoldsAcrossWorkers(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	const capUSD = 0.06
	b := startBudgetDeployment(t, ctx, capUSD, 2)
	ids := []string{"t-race-1", "t-race-2", "t-race-3", "t-race-4"}
	for _, id := range ids {
		b.submit(t, id)
	}
	total, calls := 0.0, 0
	workers := map[string]bool{}
	for _, id := range ids {
		st := b.waitFor(t, id, "paused", func(st task.Status) bool { return st.State == task.StatePaused || st.State.Final() })
		if st.State != task.StatePaused {
			t.Fatalf("%s: %s (%s); want paused, the budget being less than two tasks need", id, st.State, st.Reason)
		}
		if st.Spent != nil {
			total += st.Spent.CostUSD
			calls += st.Spent.ModelCalls
		}
		workers[st.Worker] = true
	}
	spent := b.spent(t)
	if spent > capUSD || total > spent+1e-5 {
		t.Fatalf("the tasks spent $%.6f, the ledger $%.6f, of a $%.2f cap", total, spent, capUSD)
	}
	t.Logf("two workers (%d of them ran tasks), four tasks: %d calls, $%.6f spent of the $%.2f cap", len(workers), calls, spent, capUSD)

	b.setCap(t, 2)
	b.reload(t)
	total = 0
	for _, id := range ids {
		st := b.waitFor(t, id, "final", func(st task.Status) bool { return st.State.Final() })
		if st.State != task.StateResolved || st.Result.Usage.ModelCalls != budgetCalls {
			t.Fatalf("%s: %s (%s), %d calls", id, st.State, st.Reason, st.Result.Usage.ModelCalls)
		}
		total += st.Result.Usage.CostUSD
	}
	if spent := b.spent(t); spent < total-1e-9 || spent > total+1e-4 {
		t.Errorf("the ledger says $%.6f, the results $%.6f", spent, total)
	}
}
