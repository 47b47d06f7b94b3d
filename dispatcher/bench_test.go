package dispatcher_test

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wrenchworks/wrench/dispatcher"
	"github.com/wrenchworks/wrench/queue"
	"github.com/wrenchworks/wrench/task"
)

// benchConn connects to NATS at url over TCP.
func benchConn(b *testing.B, url string) *queue.Conn {
	b.Helper()
	c, err := queue.Connect(context.Background(), queue.Config{URL: url})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(c.Close)
	return c
}

// finishCounter is an observer that counts final results.
type finishCounter struct {
	dispatcher.NopObserver
	n    atomic.Int64
	done chan struct{}
}

func (f *finishCounter) TaskFinished(context.Context, task.Result, time.Duration) {
	f.n.Add(1)
	if f.done != nil {
		f.done <- struct{}{}
	}
}

func quickReport(task.Task) task.Report {
	return task.Report{Result: task.Result{Status: task.StateResolved, Reason: "finished"}}
}

// BenchmarkDispatchOverhead measures publish (Submit) → Runner.Run entered,
// with an idle worker waiting on a loopback NATS. Target: p50 ≤ 10 ms.
func BenchmarkDispatchOverhead(b *testing.B) {
	e := startNATS(b, "127.0.0.1:0")
	c := benchConn(b, e.ClientURL())
	entered := make(chan time.Time, 1)
	r := dispatcher.RunnerFunc(func(_ context.Context, t task.Task, _ int, _ func(task.Event)) task.Report {
		entered <- time.Now()
		return quickReport(t)
	})
	obs := &finishCounter{done: make(chan struct{}, 1)}
	runDispatcher(b, newDispatcher(b, benchConn(b, e.ClientURL()), r, dispatcher.Config{Slots: 1, Observer: obs}))
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := range b.N {
		start := time.Now()
		if _, _, err := c.Submissions().Submit(context.Background(), newTask(fmt.Sprintf("t-b%d", i))); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, (<-entered).Sub(start))
		<-obs.done // idle again before the next one
	}
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(lat[len(lat)*95/100].Microseconds())/1000, "p95-ms")
}

// BenchmarkDispatchOverheadTenants is BenchmarkDispatchOverhead with four
// tenants' consumers in the queue (the default tenant's and three others),
// for a task of one of them: the idle worker cannot wait on one consumer
// and is woken by the task's publish instead.
func BenchmarkDispatchOverheadTenants(b *testing.B) {
	e := startNATS(b, "127.0.0.1:0")
	c := benchConn(b, e.ClientURL())
	tenants := []string{"t1", "t2", "t3"}
	for _, tn := range tenants { // make each tenant's consumer
		tk := newTask("t-pre-" + tn)
		tk.Tenant = tn
		if _, _, err := c.Submissions().Submit(context.Background(), tk); err != nil {
			b.Fatal(err)
		}
	}
	entered := make(chan time.Time, 1)
	r := dispatcher.RunnerFunc(func(_ context.Context, t task.Task, _ int, _ func(task.Event)) task.Report {
		if t.ID[:5] != "t-pre" {
			entered <- time.Now()
		}
		return quickReport(t)
	})
	obs := &finishCounter{done: make(chan struct{}, 4)}
	runDispatcher(b, newDispatcher(b, benchConn(b, e.ClientURL()), r, dispatcher.Config{Slots: 1, Observer: obs}))
	for range tenants {
		<-obs.done
	}
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := range b.N {
		tk := newTask(fmt.Sprintf("t-bt%d", i))
		tk.Tenant = tenants[i%len(tenants)]
		start := time.Now()
		if _, _, err := c.Submissions().Submit(context.Background(), tk); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, (<-entered).Sub(start))
		<-obs.done
	}
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(lat[len(lat)*95/100].Microseconds())/1000, "p95-ms")
}

// BenchmarkThroughputTenants is BenchmarkThroughput with the tasks spread
// over four tenants, which the worker serves by turns.
func BenchmarkThroughputTenants(b *testing.B) {
	e := startNATS(b, "127.0.0.1:0")
	c := benchConn(b, e.ClientURL())
	tenants := []string{"", "t1", "t2", "t3"}
	for i := range b.N {
		tk := newTask(fmt.Sprintf("t-tt%d", i))
		tk.Tenant = tenants[i%len(tenants)]
		if _, _, err := c.Submissions().Submit(context.Background(), tk); err != nil {
			b.Fatal(err)
		}
	}
	r := dispatcher.RunnerFunc(func(_ context.Context, t task.Task, _ int, _ func(task.Event)) task.Report {
		return quickReport(t)
	})
	obs := &finishCounter{}
	b.ResetTimer()
	start := time.Now()
	runDispatcher(b, newDispatcher(b, benchConn(b, e.ClientURL()), r, dispatcher.Config{Slots: 4, Observer: obs}))
	for obs.n.Load() < int64(b.N) {
		time.Sleep(time.Millisecond)
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "tasks/s")
}

// BenchmarkThroughput measures end-to-end tasks per second with 4 slots and
// a runner that returns at once: the cost of the queue bookkeeping per task.
func BenchmarkThroughput(b *testing.B) {
	e := startNATS(b, "127.0.0.1:0")
	c := benchConn(b, e.ClientURL())
	for i := range b.N {
		if _, _, err := c.Submissions().Submit(context.Background(), newTask(fmt.Sprintf("t-th%d", i))); err != nil {
			b.Fatal(err)
		}
	}
	r := dispatcher.RunnerFunc(func(_ context.Context, t task.Task, _ int, _ func(task.Event)) task.Report {
		return quickReport(t)
	})
	obs := &finishCounter{}
	b.ResetTimer()
	start := time.Now()
	runDispatcher(b, newDispatcher(b, benchConn(b, e.ClientURL()), r, dispatcher.Config{Slots: 4, Observer: obs}))
	for obs.n.Load() < int64(b.N) {
		time.Sleep(time.Millisecond)
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "tasks/s")
}

// BenchmarkMemoryPerInFlightTask measures the worker's heap per task in
// flight (runner blocked, no sandbox), with NATS in a separate process so
// the server's memory is not counted. Target: ≤ 10 MB per task.
func BenchmarkMemoryPerInFlightTask(b *testing.B) {
	const n = 100
	port := freePort(b)
	startHelper(b, "nats", "WRENCH_NATS_DIR="+b.TempDir(), fmt.Sprintf("WRENCH_NATS_LISTEN=127.0.0.1:%d", port))
	url := fmt.Sprintf("nats://127.0.0.1:%d", port)
	c := benchConn(b, url)
	var perTask, goroutines float64
	for i := range b.N {
		release := make(chan struct{})
		var running atomic.Int64
		r := dispatcher.RunnerFunc(func(ctx context.Context, t task.Task, _ int, emit func(task.Event)) task.Report {
			emit(task.Event{Kind: task.EventTurn, Turn: 1})
			running.Add(1)
			select {
			case <-release:
			case <-ctx.Done():
			}
			return quickReport(t)
		})
		conn := benchConn(b, url)
		d := newDispatcher(b, conn, r, dispatcher.Config{Slots: n})
		stop := runDispatcher(b, d)
		runtime.GC()
		var before runtime.MemStats
		runtime.ReadMemStats(&before)
		g0 := runtime.NumGoroutine()
		for j := range n {
			if _, _, err := c.Submissions().Submit(context.Background(), newTask(fmt.Sprintf("t-mem%d-%d", i, j))); err != nil {
				b.Fatal(err)
			}
		}
		for running.Load() < n {
			time.Sleep(5 * time.Millisecond)
		}
		runtime.GC()
		var during runtime.MemStats
		runtime.ReadMemStats(&during)
		perTask += float64(int64(during.HeapAlloc)-int64(before.HeapAlloc)) / n / (1 << 20)
		goroutines += float64(runtime.NumGoroutine()-g0) / n
		close(release)
		stop()
	}
	b.ReportMetric(perTask/float64(b.N), "MB/task")
	b.ReportMetric(goroutines/float64(b.N), "goroutines/task")
}

// BenchmarkCancelLatency measures Cancel → the running task's context is
// done. Target: well under 2 s.
func BenchmarkCancelLatency(b *testing.B) {
	e := startNATS(b, "127.0.0.1:0")
	c := benchConn(b, e.ClientURL())
	started := make(chan struct{}, 1)
	stopped := make(chan time.Time, 1)
	r := dispatcher.RunnerFunc(func(ctx context.Context, t task.Task, _ int, _ func(task.Event)) task.Report {
		started <- struct{}{}
		<-ctx.Done()
		stopped <- time.Now()
		return task.Report{Result: task.Result{Status: task.StateCancelled}}
	})
	obs := &finishCounter{done: make(chan struct{}, 1)}
	runDispatcher(b, newDispatcher(b, benchConn(b, e.ClientURL()), r, dispatcher.Config{Slots: 1, Observer: obs}))
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := range b.N {
		id := fmt.Sprintf("t-c%d", i)
		if _, _, err := c.Submissions().Submit(context.Background(), newTask(id)); err != nil {
			b.Fatal(err)
		}
		<-started
		start := time.Now()
		if _, err := c.Submissions().Cancel(context.Background(), id); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, (<-stopped).Sub(start))
		<-obs.done
	}
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(lat[len(lat)-1].Microseconds())/1000, "max-ms")
}
