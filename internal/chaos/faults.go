package chaos

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"time"

	"github.com/wrenchworks/wrench/task"
)

// aimWithin bounds how long a fault waits for its task to reach the
// phase it is aimed at.
const aimWithin = 6 * time.Minute

// errTriggered stops an event stream once a fault's trigger was seen.
var errTriggered = errors.New("trigger seen")

// trigger reports whether ev is the moment a fault of kind k strikes;
// toolResults counts the tool results seen so far.
func trigger(k Kind, ev task.Event, toolResults int) bool {
	switch k {
	case KillClone:
		return ev.Kind == task.EventPhase && ev.Phase == "clone" && strings.TrimSpace(ev.Text) == "start"
	case KillAgent, StopWorker:
		// The sixth result: the agent now waits on the model's delayed
		// seventh reply, a save point made at turn 5.
		return ev.Kind == task.EventToolResult && toolResults == 6
	case RemoveBox:
		return ev.Kind == task.EventToolResult && toolResults == 3
	case KillVerify:
		return ev.Kind == task.EventState && ev.State == task.StateVerifying
	case KillPublish:
		// The worker's final verify is over: it takes the patch, removes
		// the sandbox and hands the result to the dispatcher to store.
		return ev.Kind == task.EventPhase && ev.Phase == "verify" && ev.Text == " end"
	case Duplicate:
		return ev.Kind == task.EventState && ev.State == task.StateRunning
	}
	return false
}

// aim follows rec's events and strikes with its fault at the trigger.
func (r *runner) aim(ctx context.Context, rec *record, t task.Task) {
	k := rec.aimed
	r.count(k, func(c *faultCount) { c.aimed++ })
	if k == KillPublish && rec.github {
		r.aimPublish(ctx, rec)
		return
	}
	if k == Duplicate {
		r.resubmit(ctx, rec, t) // while queued, most likely
	}
	actx, cancel := context.WithTimeout(ctx, aimWithin)
	defer cancel()
	results := 0
	var at uint64
	var holder string
	err := r.d.client.Events(actx, rec.id, 0, func(ev task.Event) error {
		if ev.Kind == task.EventToolResult {
			results++
		}
		if ev.Kind == task.EventState && ev.State == task.StateRunning {
			// An attempt starts: learn its worker now, so that the
			// fault strikes the moment its trigger comes.
			if st, err := r.d.client.Status(ctx, rec.id); err == nil {
				holder = st.Worker
			}
		}
		if trigger(k, ev, results) {
			at = ev.Seq
			return errTriggered
		}
		return nil
	})
	if !errors.Is(err, errTriggered) {
		r.missed(k, fmt.Sprintf("%s: trigger not seen (%v)", rec.id, err))
		return
	}
	if err := r.strike(ctx, rec, t, k, holder); err != nil {
		r.missed(k, fmt.Sprintf("%s: %v", rec.id, err))
		return
	}
	r.count(k, func(c *faultCount) { c.injected++ })
	r.mu.Lock()
	rec.struckAt = at
	r.mu.Unlock()
	r.cfg.Log.Info("fault injected", "fault", string(k), "task_id", rec.id, "event", at)
	if k == Duplicate {
		// And once more after it is final.
		r.waitFinal(ctx, rec)
		r.resubmit(ctx, rec, t)
	}
}

// aimPublish holds rec's pull request request at the stand-in GitHub,
// SIGKILLs the worker publishing it, lets the request go on (so the pull
// request is made, its publisher dead), and starts the worker again.
func (r *runner) aimPublish(ctx context.Context, rec *record) {
	k := KillPublish
	hooked, release := r.gh.holdPullRequest(rec.id)
	defer release()
	select {
	case <-hooked:
	case <-time.After(aimWithin):
		r.missed(k, rec.id+": no pull request request")
		return
	case <-ctx.Done():
		return
	}
	st, err := r.d.client.Status(ctx, rec.id)
	p := r.d.worker(st.Worker)
	if err != nil || p == nil {
		r.missed(k, fmt.Sprintf("%s: publishing on %q (%v)", rec.id, st.Worker, err))
		return
	}
	killed, err := r.d.killAndRestart(ctx, p, r.pause(0, time.Second), release)
	if err != nil || !killed {
		r.missed(k, fmt.Sprintf("%s: killed %v, restart: %v", rec.id, killed, err))
		return
	}
	r.count(k, func(c *faultCount) { c.injected++ })
	r.cfg.Log.Info("fault injected", "fault", string(k), "task_id", rec.id, "worker", p.Name)
}

// strike applies fault k to rec's task, whose attempt runs on worker
// holder ("": ask the API).
func (r *runner) strike(ctx context.Context, rec *record, t task.Task, k Kind, holder string) error {
	switch k {
	case Duplicate:
		r.resubmit(ctx, rec, t)
		return nil
	case RemoveBox:
		ids, err := containers(ctx, r.cfg.Deployment, rec.id)
		if err != nil {
			return err
		}
		if len(ids) == 0 {
			return errors.New("no container to remove")
		}
		return dockerRm(ctx, ids)
	}
	if holder == "" {
		st, err := r.d.client.Status(ctx, rec.id)
		if err != nil {
			return err
		}
		if st.State.Final() {
			return fmt.Errorf("task is %s", st.State)
		}
		holder = st.Worker
	}
	p := r.d.worker(holder)
	if p == nil {
		return fmt.Errorf("task runs on %q, not one of the workers", holder)
	}
	if k == StopWorker {
		if !p.Pause() {
			return fmt.Errorf("%s was not running", p.Name)
		}
		r.faultW.Go(func() {
			sleep(ctx, r.cfg.AckWait+2*time.Second)
			p.Resume()
		})
		return nil
	}
	killed, err := r.d.killAndRestart(ctx, p, r.pause(0, time.Second), nil)
	if err != nil {
		return fmt.Errorf("restart %s: %w", p.Name, err)
	}
	if !killed {
		return fmt.Errorf("%s was not running", p.Name)
	}
	return nil
}

// killNATS kills a NATS node (the leader of the tasks stream, or one at
// random) and starts it again after a pause.
func (r *runner) killNATS(ctx context.Context, leader bool) {
	k := KillNATS
	r.count(k, func(c *faultCount) { c.aimed++ })
	nodes := r.d.q.Nodes()
	node := nodes[r.pick(len(nodes))]
	leaderName := r.d.q.Leader(ctx)
	if leader {
		for _, n := range nodes {
			if n.Name == leaderName {
				node = n
			}
		}
	}
	down := r.pause(time.Second, 3*time.Second)
	killed, err := r.d.killAndRestart(ctx, node, down, nil)
	if err != nil || !killed {
		r.missed(k, fmt.Sprintf("%s: killed %v, restart: %v", node.Name, killed, err))
		return
	}
	r.count(k, func(c *faultCount) {
		c.injected++
		c.notes = append(c.notes, fmt.Sprintf("%s down %s (the tasks stream's leader: %v)", node.Name, down.Round(time.Millisecond),
			node.Name == leaderName))
	})
	r.cfg.Log.Info("fault injected", "fault", string(k), "node", node.Name, "down", down)
}

// resubmit submits rec's task again under its id, and counts an answer
// that took it for a new task.
func (r *runner) resubmit(ctx context.Context, rec *record, t task.Task) {
	for range 40 {
		_, dup, err := r.d.client.Submit(ctx, t)
		if err == nil {
			r.mu.Lock()
			rec.resubmits++
			if !dup {
				rec.newDups++
			}
			r.mu.Unlock()
			return
		}
		sleep(ctx, 250*time.Millisecond)
	}
}

// waitFinal waits, bounded, until the poller saw rec final.
func (r *runner) waitFinal(ctx context.Context, rec *record) {
	deadline := time.Now().Add(aimWithin)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		r.mu.Lock()
		done := rec.final != nil
		r.mu.Unlock()
		if done {
			return
		}
		sleep(ctx, 200*time.Millisecond)
	}
}

func (r *runner) count(k Kind, fn func(*faultCount)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	fn(r.faults[k])
}

func (r *runner) missed(k Kind, note string) {
	r.count(k, func(c *faultCount) {
		c.missed++
		c.notes = append(c.notes, "missed: "+note)
	})
	r.cfg.Log.Info("fault missed", "fault", string(k), "note", note)
}

// pause draws a duration in [lo, hi) from the plan's generator.
func (r *runner) pause(lo, hi time.Duration) time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	return lo + time.Duration(r.plan.rng.Int64N(int64(hi-lo)))
}

// pick draws an index below n from the plan's generator.
func (r *runner) pick(n int) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.plan.rng.IntN(n)
}

// containers lists the ids of the deployment's containers (of one task,
// when task is not empty), running or not, by Wrench's labels.
func containers(ctx context.Context, deployment, task string) ([]string, error) {
	args := []string{"ps", "-aq", "--filter", "label=dev.wrench.deployment=" + deployment}
	if task != "" {
		args = append(args, "--filter", "label=dev.wrench.task="+task)
	}
	out, err := exec.CommandContext(ctx, "docker", args...).Output()
	if err != nil {
		return nil, fmt.Errorf("docker ps: %w", err)
	}
	return strings.Fields(string(out)), nil
}

// dockerRm force-removes containers, as an operator (or a crashing
// engine) would behind Wrench's back.
func dockerRm(ctx context.Context, ids []string) error {
	out, err := exec.CommandContext(ctx, "docker", append([]string{"rm", "-f"}, ids...)...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("docker rm -f: %v: %s", err, out)
	}
	return nil
}
