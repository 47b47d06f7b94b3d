package chaos

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/wrenchworks/wrench/api"
)

// deployment is the system under test: the queue, `wrench serve` (API
// only) and the workers, all processes of the built binary.
type deployment struct {
	cfg     Config
	q       Queue
	serve   *Proc
	workers map[string]*Proc
	ids     []string // worker ids, in order
	dataDir map[string]string
	apiURL  string
	client  *api.Client

	// restarting serializes each process's kill-and-restart.
	restarting map[*Proc]*sync.Mutex

	mu sync.Mutex
	// startFailures are the starts that ended in an exit.
	startFailures []string
}

// extras are what the stand-in GitHub adds to the processes' command lines.
type extras struct {
	serveArgs, workerArgs, workerEnv []string
}

// startDeployment starts the queue, serve and the workers under dir.
func startDeployment(ctx context.Context, cfg Config, dir, prices string, x extras) (*deployment, error) {
	d := &deployment{cfg: cfg, workers: map[string]*Proc{}, dataDir: map[string]string{}, restarting: map[*Proc]*sync.Mutex{}}
	serveData := filepath.Join(dir, "serve")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("create %s: %w", dir, err)
	}
	apiAddr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	if d.q, err = cfg.queue(dir, serveData); err != nil {
		return nil, err
	}
	if err := d.q.Start(ctx); err != nil {
		return nil, fmt.Errorf("start the queue: %w", err)
	}
	for _, n := range d.q.Nodes() {
		if n != nil {
			d.restarting[n] = &sync.Mutex{}
		}
	}
	ackWait := cfg.AckWait.String()
	args := append([]string{"serve", "--http", apiAddr, "--slots", "0", "--data-dir", serveData,
		"--deployment", cfg.Deployment, "--ack-wait", ackWait, "--log-level", "info"}, d.q.ServeArgs()...)
	args = append(args, x.serveArgs...)
	d.serve = newProc("serve", cfg.Bin, filepath.Join(dir, "serve.log"), nil, args...)
	d.restarting[d.serve] = &sync.Mutex{}
	if err := d.startServe(ctx); err != nil {
		return nil, err
	}
	if err := d.q.Joined(ctx, d.serve); err != nil {
		return nil, err
	}
	d.apiURL = "http://" + apiAddr
	d.client = api.NewClient(d.apiURL, "", api.WithStreamRetry(500*time.Millisecond, 120))
	for i := range cfg.Workers {
		id := fmt.Sprintf("w%d", i+1)
		data := filepath.Join(dir, id)
		args := append([]string{"worker", "--slots", fmt.Sprint(cfg.Slots), "--http", "", "--data-dir", data,
			"--deployment", cfg.Deployment, "--worker-id", id, "--ack-wait", ackWait, "--prices", prices,
			"--log-level", "info"}, d.q.WorkerArgs()...)
		args = append(args, x.workerArgs...)
		p := newProc(id, cfg.Bin, filepath.Join(dir, id+".log"), x.workerEnv, args...)
		d.workers[id], d.dataDir[id] = p, data
		d.ids = append(d.ids, id)
		d.restarting[p] = &sync.Mutex{}
		if err := d.startWorker(ctx, p); err != nil {
			return nil, err
		}
	}
	d.dataDir["serve"] = serveData
	return d, nil
}

// startWithin bounds a process's start (generous: on a loaded machine a
// restart after SIGKILL waits for the reaper's first sweep).
const startWithin = 3 * time.Minute

// startServe starts serve and waits until its API answers.
func (d *deployment) startServe(ctx context.Context) error {
	return d.supervise(ctx, d.serve, "wrench serve: API on ")
}

// startWorker starts worker p and waits until it joined the queue.
func (d *deployment) startWorker(ctx context.Context, p *Proc) error {
	return d.supervise(ctx, p, "wrench worker: "+p.Name+" joined ")
}

// supervise starts p and waits until it printed ready; a process that
// exits first is started again, as a service manager would, a second
// later, up to startTries times. Each such exit is recorded.
func (d *deployment) supervise(ctx context.Context, p *Proc, ready string) error {
	var err error
	for try := range startTries {
		if try > 0 {
			sleep(ctx, time.Second)
		}
		if err = p.Start(); err != nil {
			return err
		}
		wctx, cancel := context.WithTimeout(ctx, startWithin)
		_, err = p.WaitLine(wctx, ready)
		cancel()
		if err == nil || p.Running() {
			return err
		}
		d.mu.Lock()
		d.startFailures = append(d.startFailures, fmt.Sprintf("%s exited at start: %s", p.Name, lastLine(p.Tail(600))))
		d.mu.Unlock()
	}
	return err
}

// startTries bounds the starts of a process that keeps exiting at start.
const startTries = 10

// lastLine is the last non-empty line of s.
func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

// killAndRestart SIGKILLs p, calls dead (when not nil), waits pause, and
// starts p again. It reports whether p was running when it was killed.
func (d *deployment) killAndRestart(ctx context.Context, p *Proc, pause time.Duration, dead func()) (bool, error) {
	mu := d.restarting[p]
	mu.Lock()
	defer mu.Unlock()
	killed := p.Kill()
	if dead != nil {
		dead()
	}
	sleep(ctx, pause)
	switch {
	case p == d.serve:
		return killed, d.startServe(ctx)
	case d.workers[p.Name] == p:
		return killed, d.startWorker(ctx, p)
	}
	return killed, d.q.Restart(ctx, p)
}

// worker returns the worker process of a worker id, or nil.
func (d *deployment) worker(id string) *Proc { return d.workers[id] }

// stop stops every process with SIGTERM: the workers (their tasks are
// done by now), serve, then the queue's nodes.
func (d *deployment) stop() error {
	var errs []error
	for _, id := range d.ids {
		errs = append(errs, d.workers[id].Stop(2*time.Minute))
	}
	errs = append(errs, d.serve.Stop(time.Minute))
	for _, n := range d.q.Nodes() {
		if n != d.serve {
			errs = append(errs, n.Stop(time.Minute))
		}
	}
	return errors.Join(errs...)
}

// kill kills every process still running, for a run that failed.
func (d *deployment) kill() {
	if d == nil {
		return
	}
	for _, p := range d.workers {
		p.Kill()
	}
	if d.serve != nil {
		d.serve.Kill()
	}
	if d.q != nil {
		for _, n := range d.q.Nodes() {
			if n != nil {
				n.Kill()
			}
		}
	}
}

// workspaces counts the task workspaces left in every data dir.
func (d *deployment) workspaces() (int, []string) {
	n := 0
	var names []string
	for id, data := range d.dataDir {
		entries, err := os.ReadDir(filepath.Join(data, "workspaces"))
		if err != nil {
			continue
		}
		for _, e := range entries {
			if strings.HasPrefix(e.Name(), ".") {
				continue
			}
			n++
			names = append(names, id+"/"+e.Name())
		}
	}
	return n, names
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
