package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/wrenchworks/wrench/api"
	"github.com/wrenchworks/wrench/queue"
	"github.com/wrenchworks/wrench/task"
)

// clusterDeployment is `wrench serve --nats URLs --replicas 3` (API only)
// and workers joined to a three-node cluster of `wrench nats-server`
// processes.
type clusterDeployment struct {
	nats       *natsCluster
	serve      *wrenchProc
	api        *api.Client
	apiURL     string
	deployment string
	workers    []*wrenchProc
}

// startClusterDeployment starts the cluster, serve and workers workers
// with slots slots each.
func startClusterDeployment(t testing.TB, ctx context.Context, workers, slots int) *clusterDeployment {
	t.Helper()
	d := &clusterDeployment{deployment: fmt.Sprintf("cluster-%d", time.Now().UnixNano())}
	t.Cleanup(func() { removeContainers(d.deployment) })
	d.nats = startNATSCluster(t, ctx, 3)
	d.serve = startProc(t, "serve", "serve", "--nats", d.nats.urls(), "--replicas", "3", "--nats-monitor", d.nats.monitors(),
		"--slots", "0", "--http", "127.0.0.1:0", "--data-dir", t.TempDir(), "--deployment", d.deployment, "--log-level", "info")
	d.apiURL, _, _ = strings.Cut(d.serve.line(t, ctx, "wrench serve: API on "), " ")
	d.api = api.NewClient(d.apiURL, "")
	for i := range workers {
		id := fmt.Sprintf("w-%d", i+1)
		p := startProc(t, id, "worker", "--nats", d.nats.urls(), "--replicas", "3", "--slots", fmt.Sprint(slots),
			"--http", "", "--data-dir", t.TempDir(), "--deployment", d.deployment, "--worker-id", id,
			"--ack-wait", "5s", "--log-level", "info")
		p.line(t, ctx, "wrench worker: "+id+" joined ")
		d.workers = append(d.workers, p)
	}
	return d
}

// submit submits the tasks ids on repo and script as a client should: a
// transient error (503 while a stream elects a leader) is retried with the
// same id every second, bounded; it returns how long the retries took.
func (d *clusterDeployment) submit(t testing.TB, ctx context.Context, repo, script string, ids ...string) (refused time.Duration) {
	t.Helper()
	for _, id := range ids {
		start := time.Now()
		for {
			_, dup, err := d.api.Submit(ctx, helloTask(id, repo, script))
			if err == nil && !dup {
				break
			}
			if err == nil || !api.Transient(err) || time.Since(start) > 30*time.Second {
				t.Fatalf("submit %s: dup=%v %v", id, dup, err)
			}
			t.Logf("submit %s: %v; again in 1s", id, err)
			time.Sleep(time.Second)
		}
		refused += time.Since(start)
	}
	return refused
}

// watch waits for every task through `wrench watch` and reports those
// that did not end resolved.
func (d *clusterDeployment) watch(t testing.TB, ctx context.Context, ids []string) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make([]string, len(ids))
	for i, id := range ids {
		wg.Go(func() {
			if _, errOut, code := runWrench(t, ctx, []string{"WRENCH_SERVER=" + d.apiURL}, "watch", id); code != exitOK {
				errs[i] = fmt.Sprintf("watch %s: exit %d: %s", id, code, tail(errOut, 512))
			}
		})
	}
	wg.Wait()
	for _, e := range errs {
		if e != "" {
			t.Error(e)
		}
	}
}

// stop stops the workers and serve with SIGTERM.
func (d *clusterDeployment) stop(t testing.TB) {
	t.Helper()
	for _, p := range append(d.workers, d.serve) {
		if err := p.stop(t); err != nil {
			t.Errorf("%s on SIGTERM: %v", p.name, err)
		}
	}
}

// TestClusterSurvivesLeaderKill runs tasks on a three-node cluster with R3
// streams, KV and object store, and SIGKILLs the node that leads JetStream
// (the meta group, the task stream and the state bucket) while tasks run:
// every task, those running at the kill and those submitted with the node
// down, resolves written final exactly once with one result event; the
// node restarted in place catches up.
func TestClusterSurvivesLeaderKill(t *testing.T) {
	requireImage(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	t0 := time.Now()
	d := startClusterDeployment(t, ctx, 2, 2)
	t.Logf("cluster, serve and 2 workers up in %s", time.Since(t0).Round(100*time.Millisecond))
	nc, err := nats.Connect(d.nats.urls(), nats.MaxReconnects(-1))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()

	repo, slow := helloRepo(t, 3*time.Second)
	var ids []string
	for i := range 6 {
		ids = append(ids, fmt.Sprintf("t-before-%d", i))
	}
	d.submit(t, ctx, repo, slow, ids...)
	// Kill once the first task's agent waits on the model.
	err = d.api.Events(ctx, ids[0], 0, func(ev task.Event) error {
		if ev.Kind == task.EventToolResult {
			return context.Canceled
		}
		return nil
	})
	if err != context.Canceled {
		t.Fatalf("following %s: %v", ids[0], err)
	}
	t.Logf("%s: %s waits on the model", time.Since(t0).Round(100*time.Millisecond), ids[0])
	victim := d.nats.waitLeader(ctx)
	for _, s := range []string{queue.TasksStream, "KV_" + queue.StateBucket} {
		moved := d.nats.moveLeader(ctx, nc, s, victim)
		t.Logf("%s: %s led by %s: %v", time.Since(t0).Round(100*time.Millisecond), s, victim, moved)
	}
	running := 0
	for _, id := range ids {
		if st, err := d.api.Status(ctx, id); err == nil && st.State == task.StateRunning {
			running++
		}
	}
	t.Logf("%s: SIGKILL %s (meta leader) with %d tasks running", time.Since(t0).Round(100*time.Millisecond), victim, running)
	node := d.nats.node(victim)
	node.proc.kill()

	_, quick := helloRepo(t, 0)
	after := []string{"t-down-0", "t-down-1"}
	killed := time.Now()
	refused := d.submit(t, ctx, repo, quick, after...)
	t.Logf("admission after the kill: %s to accept both (retrying 503s)", time.Since(killed).Round(100*time.Millisecond))
	_ = refused
	began := time.Now()
	ids = append(ids, after...)
	d.watch(t, ctx, ids)
	t.Logf("all %d tasks final %s after the kill", len(ids), time.Since(killed).Round(100*time.Millisecond))
	_ = began
	if l := d.nats.waitLeader(ctx); l == victim {
		t.Fatalf("meta leader is still the killed %s", victim)
	}

	d.nats.start(ctx, node)
	for _, s := range []string{queue.TasksStream, queue.EventsStream, "KV_" + queue.StateBucket, "OBJ_" + queue.ArtifactsBucket} {
		wctx, wcancel := context.WithTimeout(ctx, 30*time.Second)
		err := d.nats.waitCurrent(wctx, nc, s)
		wcancel()
		if err != nil {
			t.Errorf("after restarting %s: %v", victim, err)
		}
	}
	t.Logf("%s caught up %s after the kill", victim, time.Since(killed).Round(100*time.Millisecond))
	// Read through the nodes that stayed up: the restarted one may not yet
	// route JetStream API requests.
	var survivors []string
	for _, n := range d.nats.nodes {
		if n != node {
			survivors = append(survivors, n.client)
		}
	}
	finals, results := finalWrites(t, ctx, strings.Join(survivors, ","), "", ids)
	for _, id := range ids {
		st, err := d.api.Status(ctx, id)
		if err != nil || st.State != task.StateResolved {
			t.Errorf("%s: %s (%s) %v", id, st.State, st.Reason, err)
		}
		if st.Attempt > 1 {
			t.Logf("%s: attempt %d on %s", id, st.Attempt, st.Worker)
		}
		if finals[id] != 1 || results[id] != 1 {
			t.Errorf("%s: written final %d times, %d result events; want 1 and 1", id, finals[id], results[id])
		}
	}
	t.Logf("checked %s after the kill", time.Since(killed).Round(100*time.Millisecond))
	d.stop(t)
	t.Logf("stopped %s after the kill", time.Since(killed).Round(100*time.Millisecond))
	if left := containersOf(t, d.deployment); left != 0 {
		t.Errorf("%d containers of deployment %s left", left, d.deployment)
	}
}

// TestClusterTwoDownRefusesAdmission: with two of three nodes SIGKILLed,
// submissions are answered 503 (the streams have no quorum); nothing
// acknowledged before is lost, and once the nodes are back every task is
// there, queued once, and the refused ones can be submitted again;
// `wrench submit` run during the outage retries until its task is in.
func TestClusterTwoDownRefusesAdmission(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c := startNATSCluster(t, ctx, 3)
	serve := startProc(t, "serve", "serve", "--nats", c.urls(), "--replicas", "3", "--slots", "0",
		"--http", "127.0.0.1:0", "--data-dir", t.TempDir(), "--log-level", "info")
	apiURL, _, _ := strings.Cut(serve.line(t, ctx, "wrench serve: API on "), " ")
	cl := api.NewClient(apiURL, "")
	d := &clusterDeployment{nats: c, api: cl, apiURL: apiURL}
	var accepted []string
	for i := range 5 {
		accepted = append(accepted, fmt.Sprintf("t-ok-%d", i))
	}
	d.submit(t, ctx, "/srv/repo", "x.yaml", accepted...)

	down := []*natsNode{c.node("n1"), c.node("n2")}
	for _, n := range down {
		n.proc.kill()
	}
	// `wrench submit` keeps submitting through the outage, with the id the
	// server chose, and gets its task in once the nodes are back.
	type cliResult struct {
		out, errOut string
		code        int
	}
	cli := make(chan cliResult, 1)
	go func() {
		out, errOut, code := runWrench(t, ctx, []string{"WRENCH_SERVER=" + apiURL}, "submit",
			"--repo", "/srv/repo", "--task", "Say hello.", "--model", "scripted:x.yaml")
		cli <- cliResult{out, errOut, code}
	}()
	refused := []string{"t-refused-0", "t-refused-1", "t-refused-2"}
	mayBe := map[string]bool{}
	for _, id := range refused {
		start := time.Now()
		_, _, err := cl.Submit(ctx, helloTask(id, "/srv/repo", "x.yaml"))
		var ae *api.Error
		if !errors.As(err, &ae) || ae.StatusCode != 503 || ae.TaskID != id {
			t.Fatalf("submit %s with two nodes down: %v; want 503 naming the task", id, err)
		}
		mayBe[id] = strings.Contains(ae.Message, "may be queued")
		t.Logf("submit %s: 503 after %s: %s", id, time.Since(start).Round(100*time.Millisecond), ae.Message)
	}

	for _, n := range down {
		c.start(ctx, n)
	}
	c.waitLeader(ctx)
	r := <-cli
	cliID := strings.TrimSpace(r.out)
	if r.code != exitOK || !strings.Contains(r.errOut, "submitting "+cliID+" again") {
		t.Errorf("wrench submit through the outage: exit %d, id %q, stderr:\n%s", r.code, cliID, r.errOut)
	}
	nc, err := nats.Connect(c.urls())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	for _, s := range queue.QueueStreams {
		if err := c.waitCurrent(ctx, nc, s); err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range accepted {
		if st, err := cl.Status(ctx, id); err != nil || st.State != task.StateQueued {
			t.Errorf("%s, acknowledged before the outage: %+v %v; want queued", id, st, err)
		}
	}
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range refused {
		if _, err := cl.Status(ctx, id); err == nil && !mayBe[id] {
			t.Errorf("%s was answered 'not queued' but is known", id)
		}
		// Again, as the 503 said. One answered "may be queued" (the store
		// timed out, as on a loaded machine) may have been: then the
		// resubmission is a duplicate, and the task runs once all the same.
		if mayBe[id] {
			if _, dup, err := cl.Submit(ctx, helloTask(id, "/srv/repo", "x.yaml")); err == nil && dup {
				continue
			}
		}
		d.submit(t, ctx, "/srv/repo", "x.yaml", id)
	}
	s, err := js.Stream(ctx, queue.TasksStream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(ctx, jetstream.WithSubjectFilter(queue.TaskSubjectPrefix+">"))
	if err != nil {
		t.Fatal(err)
	}
	all := append(append(accepted, refused...), cliID)
	for _, id := range all {
		if n := info.State.Subjects[queue.TaskSubjectPrefix+id]; n != 1 {
			t.Errorf("%s: %d messages on the queue, want 1", id, n)
		}
	}
	if info.State.Msgs != uint64(len(all)) {
		t.Errorf("%d messages on the queue, want %d", info.State.Msgs, len(all))
	}
	if err := serve.stop(t); err != nil {
		t.Errorf("serve on SIGTERM: %v", err)
	}
}
