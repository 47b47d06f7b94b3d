package chaos

import (
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"time"

	"github.com/wrenchworks/wrench/task"
)

// Report is the outcome of a run: the invariants, each passed or with its
// violations, the faults by kind, and the figures.
type Report struct {
	Seed                  uint64
	Tasks, Workers, Slots int
	// Unsubmitted counts the tasks a stalled run never submitted.
	Unsubmitted       int
	Queue, Deployment string
	Started           time.Time
	Elapsed           time.Duration
	// Logs is the directory with every process's log.
	Logs string

	Invariants []Invariant
	Faults     []FaultLine
	States     map[task.State]int

	// P50, P99 and Max are end-to-end latencies: submission to result.
	P50, P99, Max time.Duration
	// StartFailures are the process starts (after a fault) that ended in
	// an exit and were started again.
	StartFailures []string
	// Slowest are the tasks of the longest latencies.
	Slowest []Slow
	// LeakWait is how long the containers and workspaces took to go
	// after the last task was final.
	LeakWait time.Duration

	// GitHubTasks came from the webhook; PullRequests is what the
	// stand-in GitHub holds of them.
	GitHubTasks, PullRequests int

	TotalTokens  int64
	TotalCostUSD float64
	// Resumed tasks, the tokens they used over all attempts, and the
	// tokens resuming saved them (SavedUnknown: resumed tasks with no
	// clean run to measure against).
	Resumed, SavedUnknown int
	ResumedTokens         int64
	SavedTokens           int64
}

// Slow is one of the slowest tasks.
type Slow struct {
	ID, Shape string
	Fault     Kind
	Attempt   int
	Latency   time.Duration
}

// Invariant is one end check.
type Invariant struct {
	Name       string
	Violations []string
}

// FaultLine counts one kind of fault.
type FaultLine struct {
	Kind                    Kind
	Aimed, Injected, Missed int
	Notes                   []string
}

// add records an invariant with its violations (none: passed).
func (r *Report) add(name string, violations ...string) {
	r.Invariants = append(r.Invariants, Invariant{Name: name, Violations: violations})
}

// fail records a check that could not be made.
func (r *Report) fail(name, why string) { r.add(name, why) }

// Violations counts the violations of every invariant.
func (r *Report) Violations() int {
	n := 0
	for _, inv := range r.Invariants {
		n += len(inv.Violations)
	}
	return n
}

// Injected returns how many faults of kind k were injected.
func (r *Report) Injected(k Kind) int {
	for _, f := range r.Faults {
		if f.Kind == k {
			return f.Injected
		}
	}
	return 0
}

// Print writes the report: one PASS or FAIL line per invariant (with up
// to 10 violations under it), the faults by kind, and the figures.
func (r *Report) Print(w io.Writer) {
	fmt.Fprintf(w, "chaos: seed %d, %d tasks, %d workers x %d slots, %s, deployment %s, %s\n",
		r.Seed, r.Tasks, r.Workers, r.Slots, r.Queue, r.Deployment, r.Elapsed.Round(time.Second))
	fmt.Fprintf(w, "\nfaults (aimed / injected / missed):\n")
	total := 0
	for _, f := range r.Faults {
		fmt.Fprintf(w, "  %-30s %4d %4d %4d\n", f.Kind, f.Aimed, f.Injected, f.Missed)
		total += f.Injected
	}
	fmt.Fprintf(w, "  %-30s %9d\n", "total injected", total)
	for _, f := range r.Faults {
		if f.Kind != KillNATS {
			continue
		}
		for _, n := range f.Notes {
			fmt.Fprintf(w, "  nats: %s\n", n)
		}
	}
	fmt.Fprintf(w, "\ninvariants:\n")
	for _, inv := range r.Invariants {
		verdict := "PASS"
		if len(inv.Violations) > 0 {
			verdict = "FAIL"
		}
		fmt.Fprintf(w, "%s %s", verdict, inv.Name)
		if n := len(inv.Violations); n > 0 {
			fmt.Fprintf(w, " (%d violations)", n)
		}
		fmt.Fprintln(w)
		for i, v := range inv.Violations {
			if i == 10 {
				fmt.Fprintf(w, "     … %d more\n", len(inv.Violations)-10)
				break
			}
			fmt.Fprintf(w, "     %s\n", v)
		}
	}
	fmt.Fprintf(w, "\nfinal states: %s\n", r.states())
	if r.Unsubmitted > 0 {
		fmt.Fprintf(w, "never submitted (the run stalled): %d\n", r.Unsubmitted)
	}
	fmt.Fprintf(w, "latency (submission to result): p50 %s, p99 %s, max %s\n", r.P50.Round(10*time.Millisecond),
		r.P99.Round(10*time.Millisecond), r.Max.Round(10*time.Millisecond))
	for _, s := range r.Slowest {
		fmt.Fprintf(w, "  slow: %s (%s, fault %q) attempt %d in %s\n", s.ID, s.Shape, s.Fault, s.Attempt, s.Latency.Round(10*time.Millisecond))
	}
	fmt.Fprintf(w, "process starts that exited and were started again: %d\n", len(r.StartFailures))
	for i, s := range r.StartFailures {
		if i == 5 {
			fmt.Fprintf(w, "  … %d more\n", len(r.StartFailures)-5)
			break
		}
		fmt.Fprintf(w, "  %s\n", s)
	}
	fmt.Fprintf(w, "containers and workspaces gone %s after the last task\n", r.LeakWait.Round(time.Second))
	fmt.Fprintf(w, "github: %d tasks from the webhook, %d pull requests\n", r.GitHubTasks, r.PullRequests)
	fmt.Fprintf(w, "model use: %d tokens, %.4f USD\n", r.TotalTokens, r.TotalCostUSD)
	fmt.Fprintf(w, "resume: %s\n", r.resumeLine())
	fmt.Fprintf(w, "violations: %d\n", r.Violations())
}

func (r *Report) states() string {
	var parts []string
	for _, s := range []task.State{task.StateResolved, task.StateUnresolved, task.StateFailed, task.StateTimedOut,
		task.StateCancelled, task.StateRejected} {
		if n := r.States[s]; n > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", s, n))
		}
	}
	return strings.Join(parts, ", ")
}

func (r *Report) resumeLine() string {
	if r.Resumed == 0 {
		return "no task resumed"
	}
	s := fmt.Sprintf("%d tasks resumed, %d tokens over all their attempts", r.Resumed, r.ResumedTokens)
	if r.SavedTokens > 0 {
		s += fmt.Sprintf("; starting over would have cost %d more (%.0f%% saved)", r.SavedTokens,
			100*float64(r.SavedTokens)/float64(r.SavedTokens+r.ResumedTokens))
	}
	if r.SavedUnknown > 0 {
		s += fmt.Sprintf(" (%d not measured)", r.SavedUnknown)
	}
	return s
}

// Markdown writes the results table docs/reliability.md publishes;
// machine describes the machine.
func (r *Report) Markdown(w io.Writer, machine string) {
	fmt.Fprintf(w, "| | |\n|---|---|\n")
	fmt.Fprintf(w, "| date | %s |\n", r.Started.UTC().Format("2006-01-02"))
	fmt.Fprintf(w, "| machine | %s |\n", machine)
	fmt.Fprintf(w, "| deployment | %s; %d workers x %d slots; API-only serve |\n", r.Queue, r.Workers, r.Slots)
	fmt.Fprintf(w, "| seed | %d (`make chaos SEED=%d TASKS=%d`) |\n", r.Seed, r.Seed, r.Tasks)
	fmt.Fprintf(w, "| tasks | %d (%s), in %s |\n", r.Tasks, r.states(), r.Elapsed.Round(time.Second))
	var faults []string
	total := 0
	for _, f := range r.Faults {
		faults = append(faults, fmt.Sprintf("%s %d", f.Kind, f.Injected))
		total += f.Injected
	}
	fmt.Fprintf(w, "| faults injected | %d: %s |\n", total, strings.Join(faults, ", "))
	fmt.Fprintf(w, "| invariant violations | %d |\n", r.Violations())
	fmt.Fprintf(w, "| latency, submission to result | p50 %s, p99 %s |\n", r.P50.Round(100*time.Millisecond), r.P99.Round(100*time.Millisecond))
	fmt.Fprintf(w, "| resume | %s |\n", r.resumeLine())
}

// Machine describes this machine for the results table: its cores and
// memory.
func Machine() string {
	mem := "unknown memory"
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		var kb int64
		for _, l := range strings.Split(string(b), "\n") {
			if _, err := fmt.Sscanf(l, "MemTotal: %d kB", &kb); err == nil {
				mem = fmt.Sprintf("%.0f GiB", float64(kb)/(1<<20))
				break
			}
		}
	}
	return fmt.Sprintf("%d cores, %s, %s", runtime.NumCPU(), mem, runtime.GOOS+"/"+runtime.GOARCH)
}
