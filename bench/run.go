package bench

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/wrenchworks/wrench/bench/oracle"
	"github.com/wrenchworks/wrench/task"
)

// Queue is what a bench run needs of a Wrench server: the real queue and
// workers, reached through the API.
type Queue interface {
	// Submit enqueues t; a task id that already exists is not an error (the
	// existing task stands, so a resumed run never runs an instance twice).
	Submit(ctx context.Context, t task.Task) error
	// Wait returns the final result of task id.
	Wait(ctx context.Context, id string) (task.Result, error)
}

// RunConfig says what a bench run runs and where its files go.
type RunConfig struct {
	// Dir holds the run's files: run.json, results.jsonl,
	// predictions.jsonl, report.md, report.json, patches/, oracle/.
	Dir string
	// Name labels the run in task ids, metrics and reports; empty means
	// the base name of Dir.
	Name string
	// Model is a model name (or scripted:FILE), or an oracle: gold, empty
	// or wrong.
	Model     string
	Instances []Instance
	// Concurrency is how many instances are in flight at once (default 1).
	Concurrency int
	// Resume continues a run in Dir: instances with a result are not run
	// again.
	Resume bool
	Queue  Queue
	// Image, TestCommand and Limits go into every task (TestCommand
	// overrides the instances' own).
	Image       string
	TestCommand string
	Limits      task.Limits
	// Progress, when set, hears of each instance as it finishes, one at a
	// time.
	Progress func(Result)
}

// RunInfo is run.json: what a resumed run must agree with.
type RunInfo struct {
	Name      string    `json:"name"`
	Model     string    `json:"model"`
	Instances string    `json:"instances_sha256"`
	Count     int       `json:"instances"`
	Created   time.Time `json:"created"`
}

// ErrRunExists is returned when Dir already holds a run and Resume is off.
var ErrRunExists = errors.New("the output directory already holds a bench run (use --resume to continue it, or another --out)")

// Run runs every instance not yet done as a task through q, appending
// each result to results.jsonl as it finishes, and writes
// predictions.jsonl and the report once all are done.
func Run(ctx context.Context, cfg RunConfig) (Report, error) {
	if cfg.Concurrency <= 0 {
		cfg.Concurrency = 1
	}
	if cfg.Name == "" {
		cfg.Name = filepath.Base(filepath.Clean(cfg.Dir))
	}
	for i := range cfg.Instances {
		if err := cfg.Instances[i].Validate(); err != nil {
			return Report{}, err
		}
	}
	info, err := prepareDir(cfg)
	if err != nil {
		return Report{}, err
	}
	cfg.Name = info.Name
	results, err := loadResults(cfg.Dir)
	if err != nil {
		return Report{}, err
	}
	done := map[string]bool{}
	for _, r := range results {
		done[r.InstanceID] = true
	}
	var todo []Instance
	for _, in := range cfg.Instances {
		if !done[in.InstanceID] {
			todo = append(todo, in)
		}
	}
	if err := runAll(ctx, cfg, todo); err != nil {
		return Report{}, err
	}
	return Finish(cfg.Dir, cfg.Name, cfg.Model)
}

// runAll runs todo with cfg.Concurrency instances in flight.
func runAll(ctx context.Context, cfg RunConfig, todo []Instance) error {
	w, err := newResultWriter(cfg.Dir)
	if err != nil {
		return err
	}
	defer w.close()
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var progressMu sync.Mutex // Progress hears of one instance at a time
	ForEach(ctx, len(todo), cfg.Concurrency, func(i int) {
		in := todo[i]
		r, patch, err := runOne(ctx, cfg, in)
		if err == nil {
			err = w.write(r, patch)
		}
		if err != nil {
			cancel(fmt.Errorf("instance %s: %w", in.InstanceID, err))
			return
		}
		if cfg.Progress != nil {
			progressMu.Lock()
			cfg.Progress(r)
			progressMu.Unlock()
		}
	})
	return context.Cause(ctx)
}

// ForEach calls fn(i) for each i below n, with at most limit calls at a
// time, until ctx is done: then it starts no more. It returns when every
// call it started has.
func ForEach(ctx context.Context, n, limit int, fn func(i int)) {
	sem := make(chan struct{}, max(limit, 1))
	var wg sync.WaitGroup
	for i := range n {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
		wg.Go(func() {
			defer func() { <-sem }()
			fn(i)
		})
	}
	wg.Wait()
}

// runOne submits one instance's task and waits for its result.
func runOne(ctx context.Context, cfg RunConfig, in Instance) (Result, string, error) {
	t, err := instanceTask(cfg, in)
	if err != nil {
		return Result{}, "", err
	}
	if err := cfg.Queue.Submit(ctx, t); err != nil {
		return Result{}, "", fmt.Errorf("submit: %w", err)
	}
	res, err := cfg.Queue.Wait(ctx, t.ID)
	if err != nil {
		return Result{}, "", fmt.Errorf("wait for %s: %w", t.ID, err)
	}
	return ResultOf(in.InstanceID, ModelLabel(cfg.Model), res), res.Patch, nil
}

// ModelLabel is the name a model is reported under: an oracle's name,
// "scripted" for a script, else the model name.
func ModelLabel(model string) string {
	switch {
	case oracle.Is(model):
		return model
	case strings.HasPrefix(model, "scripted:"):
		return "scripted"
	case model == "":
		return "default"
	}
	return model
}

// instanceTask is the task of in: the problem statement as instruction,
// the test patch and the two lists in its hidden grading spec.
func instanceTask(cfg RunConfig, in Instance) (task.Task, error) {
	model := cfg.Model
	if oracle.Is(model) {
		data, err := oracle.Script(model, in.Patch, oracle.LocalBase(in.CloneURL(), in.BaseCommit))
		if err != nil {
			return task.Task{}, err
		}
		p, err := filepath.Abs(filepath.Join(cfg.Dir, "oracle", safeName(in.InstanceID)+"."+model+".yaml"))
		if err != nil {
			return task.Task{}, err
		}
		if err := writeFileAtomic(p, data); err != nil {
			return task.Task{}, err
		}
		model = "scripted:" + p
	}
	testCmd := in.TestCommand
	if cfg.TestCommand != "" {
		testCmd = cfg.TestCommand
	}
	return task.Task{
		ID:          TaskID(cfg.Name, cfg.Model, in.InstanceID),
		Repo:        task.Repo{URL: in.CloneURL(), Commit: in.BaseCommit},
		Instruction: Instruction(in.ProblemStatement),
		TestCommand: testCmd,
		Model:       model,
		Image:       cfg.Image,
		Limits:      cfg.Limits,
		Source:      task.Source{Kind: "bench"},
		Grading: &task.Grading{Run: cfg.Name, Instance: in.InstanceID, Model: ModelLabel(cfg.Model),
			TestPatch: in.TestPatch, FailToPass: in.FailToPass, PassToPass: in.PassToPass,
			Tests: task.TestSelection{Framework: in.Framework(), Files: in.Files()}},
	}, nil
}

var unsafeID = regexp.MustCompile(`[^A-Za-z0-9_-]+`)

func safeName(id string) string { return unsafeID.ReplaceAllString(id, "_") }

// TaskID is the task id of an instance in a run: the same run, model and
// instance always give the same id, so a resubmission is a duplicate.
func TaskID(run, model, instance string) string {
	sum := sha256.Sum256([]byte(run + "\x00" + model + "\x00" + instance))
	h := hex.EncodeToString(sum[:])
	id := "b-" + h[:8] + "-" + safeName(instance)
	if len(id) > 64 {
		id = id[:55] + "-" + h[8:16]
	}
	return id
}
