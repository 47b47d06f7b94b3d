package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"time"

	"github.com/wrenchworks/wrench/api"
	"github.com/wrenchworks/wrench/dispatcher"
	"github.com/wrenchworks/wrench/task"
)

// benchMaxBody is the request body the in-process server accepts: bench
// tasks carry their test patch (up to task.MaxTestPatchBytes).
const benchMaxBody = 4 << 20

// apiQueue is a bench.Queue over a server's API.
type apiQueue struct{ c *api.Client }

// Submit submits t; a duplicate (the task exists already) is no error.
func (q apiQueue) Submit(ctx context.Context, t task.Task) error {
	_, _, err := q.c.Submit(ctx, t)
	return err
}

// Wait follows the task's events to its result event (the final state is
// stored before it is sent), then reads the final status; when the stream
// fails it polls instead.
func (q apiQueue) Wait(ctx context.Context, id string) (task.Result, error) {
	if err := q.c.Events(ctx, id, 0, func(task.Event) error { return nil }); ctx.Err() != nil {
		return task.Result{}, ctx.Err()
	} else if err != nil && !api.Transient(err) && !errors.Is(err, io.ErrUnexpectedEOF) {
		return task.Result{}, err
	}
	st, err := defaultPoller().final(ctx, q.c, id)
	if err != nil {
		return task.Result{}, err
	}
	return api.ResultOf(st)
}

// benchQueue is the queue a bench run submits to: the server at --server,
// or `wrench serve` started in this process on OUT/server (its queue, and
// so a resumed run's tasks, kept there). stop shuts it down.
func benchQueue(ctx context.Context, env *cliEnv, f benchRunFlags) (apiQueue, func(), error) {
	if f.server != "" {
		return apiQueue{api.NewClient(f.server, f.token)}, func() {}, nil
	}
	common := f.common
	dataDir, err := filepath.Abs(filepath.Join(f.out, "server"))
	if err != nil {
		return apiQueue{}, nil, err
	}
	common.dataDir = dataDir
	sf := serveFlags{httpAddr: "127.0.0.1:0", maxBody: benchMaxBody,
		service: serviceFlags{common: common, slots: max(1, f.concurrency), verify: "finish",
			grace: 30 * time.Second, ackWait: dispatcher.DefaultAckWait, link: &queueLink{}}}
	w, cleanup, err := newWorker(ctx, env, sf.service.workerOptions(nil, true))
	if err != nil {
		return apiQueue{}, nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		cleanup()
		return apiQueue{}, nil, err
	}
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	exited := make(chan struct{})
	var code int
	quiet := &cliEnv{stdin: env.stdin, stdout: io.Discard, stderr: io.Discard, getenv: env.getenv}
	if f.common.logLevel != "warn" {
		quiet.stderr = env.stderr
	}
	go func() {
		code = serve(sctx, quiet, sf, w, ln)
		close(exited)
	}()
	stop := func() {
		cancel()
		<-exited
		cleanup()
	}
	url := "http://" + ln.Addr().String()
	if err := waitReady(ctx, url, exited); err != nil {
		stop()
		if errors.Is(err, errServerExited) {
			err = fmt.Errorf("the in-process server exited with %d", code)
		}
		return apiQueue{}, nil, err
	}
	return apiQueue{api.NewClient(url, "")}, stop, nil
}

var errServerExited = errors.New("the in-process server exited")

// waitReady waits until the server at url answers /readyz.
func waitReady(ctx context.Context, url string, exited <-chan struct{}) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url+"/readyz", nil)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-exited:
			return errServerExited
		case <-ctx.Done():
			return errors.New("the in-process server did not become ready")
		case <-time.After(50 * time.Millisecond):
		}
	}
}
