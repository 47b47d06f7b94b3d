package queue_test

import (
	"context"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/wrenchworks/wrench/internal/natstest"
	"github.com/wrenchworks/wrench/queue"
	"github.com/wrenchworks/wrench/task"
)

func tenantTask(id, tenant string) task.Task {
	tk := newTask(id)
	tk.Tenant = tenant
	return tk
}

// Tenants take turns: after a burst of one tenant's tasks, the next fetch
// goes to another tenant with a task waiting, whatever the order they were
// submitted in; the default tenant is one of them.
func TestNextTakesTenantsInTurn(t *testing.T) {
	c := connect(t, startNATS(t, ""))
	ctx := context.Background()
	w := c.Work()
	if err := w.Open(ctx, queue.ConsumerConfig{AckWait: 5 * time.Second, MaxDeliver: 3}); err != nil {
		t.Fatal(err)
	}
	for i := range 4 {
		submit(t, c, tenantTask("t-a"+string(rune('0'+i)), "acme"))
	}
	submit(t, c, tenantTask("t-b0", "bolt"))
	submit(t, c, tenantTask("t-b1", "bolt"))
	submit(t, c, newTask("t-d0")) // the default tenant's
	var got []string
	for range 7 {
		d := nextDelivery(t, w)
		got = append(got, d.TaskID)
		if err := d.Ack(ctx); err != nil {
			t.Fatal(err)
		}
	}
	// One of each tenant per round, in a fixed order (default, then by
	// name), each tenant's own tasks in submission order.
	want := []string{"t-d0", "t-a0", "t-b0", "t-a1", "t-b1", "t-a2", "t-a3"}
	if !slices.Equal(got, want) {
		t.Fatalf("deliveries %v, want %v", got, want)
	}
	if d, err := w.Next(ctx, 100*time.Millisecond); d != nil || err != nil {
		t.Fatalf("an eighth delivery: %+v %v", d, err)
	}
}

// A tenant Eligible refuses (at its cluster-wide limit) is skipped: its
// tasks stay queued and another tenant's go ahead.
func TestNextSkipsIneligibleTenants(t *testing.T) {
	c := connect(t, startNATS(t, ""))
	ctx := context.Background()
	w := c.Work()
	var full atomic.Bool
	full.Store(true)
	err := w.Open(ctx, queue.ConsumerConfig{AckWait: 5 * time.Second, MaxDeliver: 3,
		Eligible: func(tenant string) bool { return tenant != "acme" || !full.Load() }})
	if err != nil {
		t.Fatal(err)
	}
	submit(t, c, tenantTask("t-a0", "acme"))
	submit(t, c, tenantTask("t-b0", "bolt"))
	if d := nextDelivery(t, w); d.TaskID != "t-b0" {
		t.Fatalf("got %s, want bolt's task", d.TaskID)
	}
	if d, err := w.Next(ctx, 200*time.Millisecond); d != nil || err != nil {
		t.Fatalf("took a task of a tenant at its limit: %+v %v", d, err)
	}
	full.Store(false)
	if d := nextDelivery(t, w); d.TaskID != "t-a0" {
		t.Fatalf("got %s, want acme's task once eligible", d.TaskID)
	}
}

// A tenant's task is published on its own subject, its consumer is made by
// the first submission, and the id lookups (a task with no state record,
// cancelling one) find it there.
func TestTenantSubjects(t *testing.T) {
	s := startNATS(t, "")
	c := connect(t, s)
	ctx := context.Background()
	submit(t, c, tenantTask("t-x", "acme"))
	js := natstest.JetStream(t, s)
	stream, err := js.Stream(ctx, queue.TasksStream)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := stream.GetLastMsgForSubject(ctx, "wrench.tasks.acme.t-x"); err != nil {
		t.Fatalf("tenant task not on wrench.tasks.acme.t-x: %v", err)
	}
	if _, err := stream.Consumer(ctx, queue.TenantConsumer("acme")); err != nil {
		t.Fatalf("submission did not make the tenant's consumer: %v", err)
	}
	// Without its record the task is still found in the queue.
	kv, err := js.KeyValue(ctx, queue.StateBucket)
	if err != nil {
		t.Fatal(err)
	}
	if err := kv.Delete(ctx, "task.t-x"); err != nil {
		t.Fatal(err)
	}
	st, err := c.States().Status(ctx, "t-x")
	if err != nil || st.State != task.StateQueued || st.Task.Tenant != "acme" {
		t.Fatalf("status of an unrecorded tenant task: %+v %v", st, err)
	}
	if st, err := c.Submissions().Cancel(ctx, "t-x"); err != nil || st.State != task.StateCancelled {
		t.Fatalf("cancel: %+v %v", st, err)
	}
	if n := natstest.StreamMsgs(t, s, queue.TasksStream); n != 0 {
		t.Fatalf("cancelled tenant task left %d messages", n)
	}
}

// A deployment laid out before tenants (one consumer on wrench.tasks.>, a
// dead-letter stream capturing that consumer's advisories only) with tasks
// queued and one delivered but unacknowledged: opening the work role
// narrows the default consumer, so tenants' consumers fit beside it, the
// dead-letter stream captures every consumer's advisories, and every task
// is delivered: the queued ones, the unacknowledged one after its AckWait,
// and a new tenant's.
func TestUpgradeFromOneConsumer(t *testing.T) {
	s := startNATS(t, "")
	c := connect(t, s)
	ctx := context.Background()
	js := natstest.JetStream(t, s)
	stream, err := js.Stream(ctx, queue.TasksStream)
	if err != nil {
		t.Fatal(err)
	}
	old, err := stream.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{Durable: queue.WorkersConsumer,
		AckPolicy: jetstream.AckExplicitPolicy, AckWait: 500 * time.Millisecond, MaxDeliver: 5,
		FilterSubject: queue.TaskSubjectPrefix + ">", MaxAckPending: -1})
	if err != nil {
		t.Fatal(err)
	}
	dead, err := js.Stream(ctx, queue.DeadLetterStream)
	if err != nil {
		t.Fatal(err)
	}
	dc := dead.CachedInfo().Config
	dc.Subjects = []string{queue.DeadLetterSubjectPrefix + ">", queue.MaxDeliveriesAdvisory}
	if _, err := js.UpdateStream(ctx, dc); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"t-old0", "t-old1", "t-old2"} {
		submit(t, c, newTask(id))
	}
	b, err := old.Fetch(1, jetstream.FetchMaxWait(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	for m := range b.Messages() {
		_ = m // delivered to a worker of the old version that then stopped
	}

	w := c.Work()
	if err := w.Open(ctx, queue.ConsumerConfig{AckWait: 500 * time.Millisecond, MaxDeliver: 5}); err != nil {
		t.Fatalf("open over the old layout: %v", err)
	}
	info, err := dead.Info(ctx)
	if err != nil || !slices.Contains(info.Config.Subjects, queue.MaxDeliveriesAdvisories) {
		t.Fatalf("dead-letter subjects %v (%v)", info.Config.Subjects, err)
	}
	submit(t, c, tenantTask("t-new", "acme"))
	seen := map[string]bool{}
	deadline := time.Now().Add(waitLimit)
	for len(seen) < 4 && time.Now().Before(deadline) {
		d, err := w.Next(ctx, 500*time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		if d != nil {
			seen[d.TaskID] = true
			if err := d.Ack(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	if len(seen) != 4 {
		t.Fatalf("delivered %v, want the three old tasks and the new tenant's", seen)
	}
}

// A tenant's task whose deliveries run out is dead-lettered like the
// default tenant's: its consumer's advisory is captured too.
func TestTenantTaskDeadLettered(t *testing.T) {
	c := connect(t, startNATS(t, ""))
	ctx := context.Background()
	w := c.Work()
	if err := w.Open(ctx, queue.ConsumerConfig{AckWait: 300 * time.Millisecond, MaxDeliver: 2}); err != nil {
		t.Fatal(err)
	}
	submit(t, c, tenantTask("t-tdead", "acme"))
	for range 2 {
		nextDelivery(t, w) // never acked: the worker "died"
	}
	if d, err := w.Next(ctx, time.Second); err != nil || d != nil {
		t.Fatalf("a third delivery: %+v, %v", d, err)
	}
	b, err := w.BuryExhausted(ctx, waitLimit)
	if err != nil || b.TaskID != "t-tdead" || !strings.Contains(b.Reason, "deliveries exhausted") {
		t.Fatalf("buried %+v, %v", b, err)
	}
	if b.Status.Result == nil || b.Status.Result.Tenant != "acme" {
		t.Fatalf("dead-lettered result %+v", b.Status.Result)
	}
}

// The semaphore: at most max places, a release frees one, a lease
// abandoned by its holder (a worker that died) expires and its place comes
// back, a renewed one does not; many holders over two connections racing
// for the places never get more than max.
func TestLimitsLeases(t *testing.T) {
	s := startNATS(t, "")
	c1, c2 := connect(t, s), connect(t, s)
	ctx := context.Background()
	l1, l2 := c1.Limits(), c2.Limits()
	const ttl = 400 * time.Millisecond
	acquire := func(l *queue.Limits, holder string) bool {
		t.Helper()
		ok, err := l.Acquire(ctx, "tenant.acme", 2, holder, ttl)
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	if !acquire(l1, "w1/a") || !acquire(l2, "w2/b") {
		t.Fatal("two places of two not granted")
	}
	if acquire(l2, "w2/c") {
		t.Fatal("a third place granted under a limit of two")
	}
	if !acquire(l1, "w1/a") {
		t.Fatal("a holder could not take its own place again")
	}
	if err := l2.Release(ctx, "tenant.acme", "w2/b"); err != nil {
		t.Fatal(err)
	}
	if !acquire(l2, "w2/c") {
		t.Fatal("a released place was not granted")
	}
	// w1/a keeps renewing; w2/c is abandoned.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(ttl / 4):
				if err := l1.Renew(ctx, "tenant.acme", "w1/a", ttl); err != nil {
					t.Error(err)
				}
			}
		}
	})
	if acquire(l2, "w2/d") {
		t.Fatal("a place granted while both leases are live")
	}
	waitFor(t, "the abandoned lease to expire", func() bool { return acquire(l2, "w2/d") })
	if acquire(l2, "w2/e") {
		t.Fatal("the renewed lease expired")
	}
	close(stop)
	wg.Wait()
	if n, err := l1.Held(ctx, "tenant.acme"); err != nil || n != 2 {
		t.Fatalf("held %d (%v), want 2", n, err)
	}

	// A race: 40 holders over two connections, 3 places.
	var granted atomic.Int32
	var racers sync.WaitGroup
	for i := range 40 {
		l := l1
		if i%2 == 1 {
			l = l2
		}
		racers.Go(func() {
			ok, err := l.Acquire(ctx, "repo.x", 3, "h"+string(rune('A'+i)), time.Minute)
			if err != nil {
				t.Error(err)
			}
			if ok {
				granted.Add(1)
			}
		})
	}
	racers.Wait()
	if g := granted.Load(); g != 3 {
		t.Fatalf("%d places granted under a limit of 3", g)
	}
}

// A task published on a tenant's subject by hand, before that tenant has a
// consumer, is not stranded: the work role finds it and makes the
// consumer.
func TestHandPublishedTenantTaskIsAdopted(t *testing.T) {
	s := startNATS(t, "")
	c := connect(t, s)
	ctx := context.Background()
	w := c.Work()
	if err := w.Open(ctx, queue.ConsumerConfig{AckWait: 5 * time.Second, MaxDeliver: 3}); err != nil {
		t.Fatal(err)
	}
	body := `{"id":"t-hand","repo":{"url":"https://example.com/r.git"},"instruction":"x","tenant":"newt"}`
	if _, err := natstest.JetStream(t, s).Publish(ctx, "wrench.tasks.newt.t-hand", []byte(body)); err != nil {
		t.Fatal(err)
	}
	if d := nextDelivery(t, w); d.TaskID != "t-hand" {
		t.Fatalf("got %s", d.TaskID)
	}
}

// Open makes the consumers of the tenants it is given before any of their
// tasks exists (an autoscaler reads a tenant's consumer from the start);
// their tasks, submitted later, are delivered through them. A name that
// is no tenant's is refused.
func TestOpenMakesNamedTenantsConsumers(t *testing.T) {
	s := startNATS(t, "")
	c := connect(t, s)
	ctx := context.Background()
	w := c.Work()
	if err := w.Open(ctx, queue.ConsumerConfig{AckWait: time.Minute, MaxDeliver: 3, Tenants: []string{"acme", "default", "beta"}}); err != nil {
		t.Fatal(err)
	}
	stream, err := natstest.JetStream(t, s).Stream(ctx, queue.TasksStream)
	if err != nil {
		t.Fatal(err)
	}
	for _, tn := range []string{"acme", "beta", "default"} {
		cons, err := stream.Consumer(ctx, queue.TenantConsumer(tn))
		if err != nil {
			t.Fatalf("no consumer for tenant %s after Open: %v", tn, err)
		}
		if cfg := cons.CachedInfo().Config; cfg.AckWait != time.Minute || cfg.MaxDeliver != 3 {
			t.Errorf("consumer of %s: ack wait %s, max deliver %d; want Open's", tn, cfg.AckWait, cfg.MaxDeliver)
		}
	}
	submit(t, c, tenantTask("t-beta", "beta"))
	if d := nextDelivery(t, w); d.TaskID != "t-beta" {
		t.Fatalf("delivered %s, want t-beta", d.TaskID)
	}
	if err := c.Work().Open(ctx, queue.ConsumerConfig{AckWait: time.Minute, MaxDeliver: 3, Tenants: []string{"Not A Tenant"}}); err == nil {
		t.Error("Open accepted a tenant name that is not one")
	}
}
