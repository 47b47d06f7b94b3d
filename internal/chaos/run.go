package chaos

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/wrenchworks/wrench/api"
	"github.com/wrenchworks/wrench/task"
)

// record is what the suite knows of one task.
type record struct {
	id    string
	shape shape
	aimed Kind // "" when no fault is aimed at it
	// github says the task comes from the stand-in GitHub's webhook, for
	// issue number issue; its id is serve's answer.
	github    bool
	issue     int
	limits    task.Limits
	submitted time.Time
	// firstDup is set when the very first submission of the id was
	// answered as a duplicate (the id was new).
	firstDup bool
	// resubmits counts the duplicate submissions and newDups those
	// answered as if the id were new.
	resubmits, newDups int
	// struckAt is the sequence of the event at which its fault struck.
	struckAt uint64
	final    *task.Status
}

// runner is one run of the suite.
type runner struct {
	cfg  Config
	d    *deployment
	w    *workload
	plan *plan
	recs []*record
	gh   *ghSink

	mu     sync.Mutex
	faults map[Kind]*faultCount
	faultW sync.WaitGroup // fault goroutines
	slots  chan struct{}  // one per task in flight
	open   map[string]*record
	// progress is when a task last became final (or the run began).
	progress time.Time
}

// errStalled ends a run in which no task became final for stallAfter.
var errStalled = errors.New("no task became final")

// stallAfter is how long a run waits without a task becoming final before
// it stops and reports the tasks still open as lost.
const stallAfter = 10 * time.Minute

// stalled reports whether tasks are open and none became final for
// stallAfter.
func (r *runner) stalled() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.open) > 0 && time.Since(r.progress) > stallAfter
}

// faultCount counts one kind's faults.
type faultCount struct {
	aimed, injected, missed int
	notes                   []string
}

// Run runs the suite and returns its report; the error is for a run that
// could not be carried out (the deployment did not start, the run timed
// out), never for a violation, which the report holds.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	started := time.Now()
	w, err := newWorkload(filepath.Join(cfg.Dir, "work"), 4)
	if err != nil {
		return nil, err
	}
	p := newPlan(cfg.Seed, cfg.Tasks, cfg.FaultsPerKind, len(w.repos), cfg.GitHubShare)
	r := &runner{cfg: cfg, w: w, plan: p, faults: map[Kind]*faultCount{}, slots: make(chan struct{}, cfg.InFlight),
		open: map[string]*record{}}
	for _, k := range Kinds {
		r.faults[k] = &faultCount{}
	}
	if err := r.makeRecords(); err != nil {
		return nil, err
	}
	if r.gh, err = newGHSink(filepath.Join(cfg.Dir, "github"), cfg.Log); err != nil {
		return nil, err
	}
	defer r.gh.close()
	x := extras{serveArgs: r.gh.serveArgs(), workerArgs: r.gh.flags, workerEnv: r.gh.workerEnv(w.quick)}
	cfg.Log.Info("starting the deployment", "deployment", cfg.Deployment, "workers", cfg.Workers, "slots", cfg.Slots)
	r.d, err = startDeployment(ctx, cfg, filepath.Join(cfg.Dir, "deploy"), w.prices, x)
	defer removeContainers(cfg.Deployment)
	if err != nil {
		r.d.kill()
		return nil, fmt.Errorf("start the deployment: %w", err)
	}
	defer r.d.kill()
	rep := &Report{Seed: cfg.Seed, Tasks: cfg.Tasks, Workers: cfg.Workers, Slots: cfg.Slots, Queue: r.d.q.Kind(),
		Deployment: cfg.Deployment, Started: started, Logs: filepath.Join(cfg.Dir, "deploy"), States: map[task.State]int{}}
	fctx, stopFaults := context.WithCancel(ctx)
	defer stopFaults()
	r.progress = time.Now()
	if err := r.submitAll(fctx); errors.Is(err, errStalled) {
		r.mu.Lock()
		rep.add("the deployment kept making progress", fmt.Sprintf("%s for %s with %d tasks open; stopped there", err, stallAfter, len(r.open)))
		r.mu.Unlock()
		stopFaults()
	} else if err != nil {
		return nil, err
	}
	r.faultW.Wait()
	rep.Elapsed = time.Since(started)
	r.check(ctx, rep)
	return rep, nil
}

// makeRecords builds every task of the plan (and the repositories of the
// clone faults' tasks).
func (r *runner) makeRecords() error {
	for i := range r.cfg.Tasks {
		s := r.plan.shapes[i]
		id := fmt.Sprintf("t-chaos-%d-%04d", r.cfg.Seed, i)
		repo := r.w.repos[r.plan.repos[i]]
		if s == shapeBigClone {
			var err error
			if repo, err = r.w.bigRepo(id, bigBlob); err != nil {
				return err
			}
		}
		t := r.w.task(id, s, repo)
		rec := &record{id: id, shape: s, aimed: r.plan.aimed[i], limits: t.Limits}
		if r.plan.github[i] {
			// Serve names the task; its limits are the policy's.
			rec.id, rec.github, rec.issue, rec.limits = "", true, 1000+i, task.Limits{}
		}
		r.recs = append(r.recs, rec)
	}
	return nil
}

// bigBlob is the size of a clone fault's repository blob: large enough
// that its clone takes a good part of a second on the project machine.
const bigBlob = 12 << 20

// submitAll submits every task, at most cfg.InFlight not final at a time,
// starting the faults as their tasks go in, and waits until every task is
// final.
func (r *runner) submitAll(ctx context.Context) error {
	pollCtx, stopPoll := context.WithCancel(ctx)
	var pollW sync.WaitGroup
	pollW.Go(func() { r.poll(pollCtx) })
	defer func() {
		stopPoll()
		pollW.Wait()
	}()
	natsAt := map[int]bool{}
	for _, i := range r.plan.natsAt {
		natsAt[i] = true
	}
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for i, rec := range r.recs {
	wait:
		for {
			select {
			case r.slots <- struct{}{}:
				break wait
			case <-tick.C:
				if r.stalled() {
					return errStalled
				}
			case <-ctx.Done():
				return fmt.Errorf("submitting task %d of %d: %w", i+1, len(r.recs), ctx.Err())
			}
		}
		if natsAt[i] {
			r.faultW.Go(func() { r.killNATS(ctx, r.plan.natsLeader[i]) })
		}
		if err := r.submit(ctx, rec, i); err != nil {
			return err
		}
		if (i+1)%50 == 0 {
			r.cfg.Log.Info("submitted", "tasks", i+1, "of", len(r.recs))
		}
	}
	for {
		r.mu.Lock()
		left := len(r.open)
		r.mu.Unlock()
		if left == 0 {
			return nil
		}
		if r.stalled() {
			return errStalled
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %d tasks to be final: %w", left, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// submit submits one task, retrying while the API is down (a NATS fault
// restarts it): the same id again is always safe.
func (r *runner) submit(ctx context.Context, rec *record, i int) error {
	s := r.plan.shapes[i]
	repo := r.w.repos[r.plan.repos[i]]
	if s == shapeBigClone {
		repo = filepath.Join(r.w.dir, "repos", "big-"+rec.id)
	}
	t := r.w.task(rec.id, s, repo)
	rec.submitted = time.Now()
	if rec.github {
		return r.submitGitHub(ctx, rec)
	}
	r.mu.Lock()
	r.open[rec.id] = rec
	r.mu.Unlock()
	for try := 0; ; try++ {
		_, dup, err := r.d.client.Submit(ctx, t)
		if err == nil {
			rec.firstDup = dup && try == 0
			break
		}
		if !api.Transient(err) || time.Since(rec.submitted) > 3*time.Minute {
			return fmt.Errorf("submit %s: %w", rec.id, err)
		}
		sleep(ctx, 250*time.Millisecond)
	}
	if rec.aimed != "" {
		r.faultW.Go(func() { r.aim(ctx, rec, t) })
	}
	return nil
}

// submitGitHub delivers rec's webhook, again while serve does not answer
// (GitHub redelivers a delivery that failed).
func (r *runner) submitGitHub(ctx context.Context, rec *record) error {
	for try := 0; ; try++ {
		id, dup, err := r.gh.deliver(ctx, r.d.apiURL, rec.issue, fmt.Sprintf("d-%d-%d", rec.issue, try))
		if err == nil {
			r.mu.Lock()
			rec.id, rec.firstDup = id, dup && try == 0
			r.open[id] = rec
			r.mu.Unlock()
			break
		}
		var te *transientError
		if !errors.As(err, &te) || time.Since(rec.submitted) > 3*time.Minute {
			return fmt.Errorf("deliver the webhook of issue %d: %w", rec.issue, err)
		}
		sleep(ctx, 250*time.Millisecond)
	}
	if rec.aimed != "" {
		r.faultW.Go(func() { r.aim(ctx, rec, task.Task{}) })
	}
	return nil
}

// poll reads the status of every task in flight until ctx ends, and
// frees a slot for each that became final.
func (r *runner) poll(ctx context.Context) {
	for ctx.Err() == nil {
		r.mu.Lock()
		open := make([]*record, 0, len(r.open))
		for _, rec := range r.open {
			open = append(open, rec)
		}
		r.mu.Unlock()
		for _, rec := range open {
			st, err := r.d.client.Status(ctx, rec.id)
			if err != nil || !st.State.Final() {
				continue
			}
			r.mu.Lock()
			rec.final = &st
			delete(r.open, rec.id)
			r.progress = time.Now()
			r.mu.Unlock()
			<-r.slots
		}
		sleep(ctx, 250*time.Millisecond)
	}
}

// removeContainers force-removes what is left of a deployment after the
// checks counted it, and its environment snapshots (images the workers
// keep as a cache, labelled with the deployment).
func removeContainers(deployment string) {
	ids, _ := containers(context.Background(), deployment, "")
	if len(ids) > 0 {
		_ = dockerRm(context.Background(), ids)
	}
	out, _ := exec.Command("docker", "images", "-q", "--filter", "label=dev.wrench.deployment="+deployment).Output()
	if imgs := strings.Fields(string(out)); len(imgs) > 0 {
		_ = exec.Command("docker", append([]string{"rmi", "-f"}, imgs...)...).Run()
	}
}
