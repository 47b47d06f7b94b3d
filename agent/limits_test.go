package agent_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/wrenchworks/wrench/agent"
	"github.com/wrenchworks/wrench/agent/memenv"
	"github.com/wrenchworks/wrench/sandbox"
	"github.com/wrenchworks/wrench/task"
)

// busy returns n replies that each write a file and run a command.
func busy(n int) []reply {
	var out []reply
	for i := 0; i < n; i++ {
		out = append(out, calls(call("write", map[string]any{"path": "work.txt", "content": string(rune('a' + i%26))}), call("bash", map[string]any{"command": fmt.Sprintf("echo step %d", i)})))
	}
	return out
}

func TestLimits(t *testing.T) {
	for _, tc := range []struct {
		name      string
		limits    agent.Limits
		prices    map[string]agent.Price
		onLimit   func(agent.StopReason) bool
		reason    agent.StopReason
		modelCall int
	}{
		{name: "max turns", limits: agent.Limits{MaxTurns: 3}, reason: agent.StopMaxTurns, modelCall: 3},
		{name: "unlimited stops at the hard cap", limits: agent.Limits{MaxTurns: -1, HardTurnCap: 4}, reason: agent.StopMaxTurns, modelCall: 4},
		{name: "zero means no explicit limit, hard cap holds", limits: agent.Limits{HardTurnCap: 5}, reason: agent.StopMaxTurns, modelCall: 5},
		{name: "OnLimit grants another allowance", limits: agent.Limits{MaxTurns: 2}, onLimit: onceYes(), reason: agent.StopMaxTurns, modelCall: 4},
		// 110 input + 10 output tokens per call at $1/$10 per MTok = $0.0002.
		{name: "max cost", limits: agent.Limits{MaxCostUSD: 0.0005}, prices: map[string]agent.Price{"scripted": {InputPerMTok: 1, OutputPerMTok: 10}}, reason: agent.StopMaxCost, modelCall: 3},
		{name: "max tokens", limits: agent.Limits{MaxTokens: 250}, reason: agent.StopMaxTokens, modelCall: 3},
		{name: "timeout", limits: agent.Limits{Timeout: time.Nanosecond}, reason: agent.StopTimeout, modelCall: 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := memenv.New(nil)
			var rec recorder
			r, m := newRun(env, busy(20)...)
			r.Limits = tc.limits
			r.OnLimit = tc.onLimit
			r.OnEvent = rec.on
			out, err := agent.New(agent.Config{Prices: tc.prices}).Run(context.Background(), r)
			if err != nil {
				t.Fatal(err)
			}
			if out.Reason != tc.reason || len(m.requests()) != tc.modelCall {
				t.Errorf("reason %s after %d model calls, want %s after %d", out.Reason, len(m.requests()), tc.reason, tc.modelCall)
			}
			if tc.modelCall > 0 {
				if _, ok := env.File("work.txt"); !ok {
					t.Errorf("partial work not kept")
				}
			}
			if l := rec.of(task.EventLimit); len(l) == 0 || l[len(l)-1].Text != string(tc.reason) {
				t.Errorf("limit events = %+v", l)
			}
		})
	}
}

func onceYes() func(agent.StopReason) bool {
	asked := 0
	return func(agent.StopReason) bool { asked++; return asked == 1 }
}

func TestCostIsPricedPerModel(t *testing.T) {
	cfg := agent.Config{Prices: map[string]agent.Price{"gpt-4o": {InputPerMTok: 2.5, OutputPerMTok: 10, CachedInputPerMTok: 1.25}}}
	got, ok := cfg.Cost("gpt-4o-2024-08-06", agent.TokenUsage{InputTokens: 1_000_000, CachedTokens: 400_000, OutputTokens: 100_000})
	if want := 0.6*2.5 + 0.4*1.25 + 0.1*10; !ok || got < want-1e-9 || got > want+1e-9 {
		t.Errorf("cost = %v %v, want %v", got, ok, want)
	}
	if _, ok := cfg.Cost("openai/gpt-4o", agent.TokenUsage{InputTokens: 1}); !ok {
		t.Errorf("provider prefix not stripped")
	}
	for _, name := range []string{"llama", "gpt-4o-mini"} {
		if _, ok := cfg.Cost(name, agent.TokenUsage{InputTokens: 1}); ok {
			t.Errorf("%s priced from another model", name)
		}
	}
}

// blockingModel signals when a call has started and blocks until ctx ends.
type blockingModel struct {
	started chan struct{}
	ctxErr  chan error
}

func (m *blockingModel) Chat(ctx context.Context, _ agent.ModelRequest, _ func(agent.StreamEvent)) (agent.ModelResponse, error) {
	close(m.started)
	<-ctx.Done()
	m.ctxErr <- ctx.Err()
	return agent.ModelResponse{}, ctx.Err()
}

func TestCancellationStopsModelAndTool(t *testing.T) {
	t.Run("blocking model call", func(t *testing.T) {
		m := &blockingModel{started: make(chan struct{}), ctxErr: make(chan error, 1)}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan *agent.Outcome)
		go func() {
			out, _ := agent.New(agent.Config{}).Run(ctx, &agent.Run{Model: m, Env: memenv.New(nil), EnvInfo: envInfo})
			done <- out
		}()
		<-m.started
		cancel()
		out := <-done
		// The model saw the cancellation before Run returned.
		select {
		case err := <-m.ctxErr:
			if !errors.Is(err, context.Canceled) {
				t.Errorf("model ctx err = %v", err)
			}
		default:
			t.Errorf("Run returned before the model call ended")
		}
		if out.Reason != agent.StopCancelled {
			t.Errorf("reason = %s", out.Reason)
		}
	})
	t.Run("blocking command", func(t *testing.T) {
		env := memenv.New(nil)
		started, ended := make(chan struct{}), make(chan error, 1)
		env.Handle("make slow", func(ctx context.Context, req sandbox.ExecRequest) (sandbox.ExecResult, error) {
			close(started)
			<-ctx.Done()
			ended <- ctx.Err()
			return sandbox.ExecResult{}, ctx.Err()
		})
		ctx, cancel := context.WithCancel(context.Background())
		r, _ := newRun(env, calls(call("bash", map[string]any{"command": "make slow"}), call("bash", map[string]any{"command": "echo after"})))
		done := make(chan *agent.Outcome)
		go func() {
			out, _ := agent.New(agent.Config{}).Run(ctx, r)
			done <- out
		}()
		<-started
		cancel()
		out := <-done
		select {
		case <-ended:
		default:
			t.Errorf("Run returned before the command ended")
		}
		if out.Reason != agent.StopCancelled {
			t.Errorf("reason = %s", out.Reason)
		}
		if got := env.Commands(); len(got) != 1 {
			t.Errorf("commands after cancel: %q", got)
		}
		res := toolResults(out.Messages)
		if len(res) != 2 || res[1].Content != "Not run: interrupted." {
			t.Errorf("every call needs a result: %+v", res)
		}
	})
	t.Run("timeout interrupts a blocking command", func(t *testing.T) {
		env := memenv.New(nil)
		env.Handle("make slow", func(ctx context.Context, req sandbox.ExecRequest) (sandbox.ExecResult, error) {
			<-ctx.Done()
			return sandbox.ExecResult{}, ctx.Err()
		})
		r, _ := newRun(env, calls(call("bash", map[string]any{"command": "make slow"})))
		r.Limits.Timeout = 20 * time.Millisecond
		out, _ := agent.New(agent.Config{}).Run(context.Background(), r)
		if out.Reason != agent.StopTimeout {
			t.Errorf("reason = %s (%v)", out.Reason, out.Err)
		}
	})
}

func TestConcurrentRunsShareOneAgent(t *testing.T) {
	a := agent.New(agent.Config{})
	var wg sync.WaitGroup
	outs := make([]*agent.Outcome, 8)
	envs := make([]*memenv.Env, 8)
	for i := range outs {
		envs[i] = memenv.New(map[string]string{"calc.go": calcGo})
		r, _ := newRun(envs[i], calls(view("calc.go")), calls(edit("calc.go", "a - b", "a + b")), finish("ok"))
		r.Task.TestCommand = ""
		wg.Add(1)
		go func() {
			defer wg.Done()
			outs[i], _ = a.Run(context.Background(), r)
		}()
	}
	wg.Wait()
	for i, out := range outs {
		if got, _ := envs[i].File("calc.go"); out.Reason != agent.StopFinished || got == calcGo {
			t.Errorf("run %d: %s, %q", i, out.Reason, got)
		}
	}
}

func TestNoGoroutineLeaks(t *testing.T) {
	before := runtime.NumGoroutine()
	for i := 0; i < 20; i++ {
		env := memenv.New(nil)
		r, _ := newRun(env, busy(3)...)
		r.Limits.Timeout = time.Hour
		r.Limits.MaxTurns = 3
		_, _ = agent.New(agent.Config{}).Run(context.Background(), r)
		ctx, cancel := context.WithCancel(context.Background())
		m := &blockingModel{started: make(chan struct{}), ctxErr: make(chan error, 1)}
		done := make(chan struct{})
		go func() {
			defer close(done)
			_, _ = agent.New(agent.Config{}).Run(ctx, &agent.Run{Model: m, Env: env, EnvInfo: envInfo})
		}()
		<-m.started
		cancel()
		<-done
	}
	// Goroutines that just returned may take a moment to be reaped.
	for i := 0; i < 100 && runtime.NumGoroutine() > before; i++ {
		runtime.Gosched()
		time.Sleep(time.Millisecond)
	}
	if after := runtime.NumGoroutine(); after > before {
		buf := make([]byte, 1<<16)
		t.Errorf("goroutines: %d before, %d after\n%s", before, after, buf[:runtime.Stack(buf, true)])
	}
}

func TestOnLimitExtendsTheWallClock(t *testing.T) {
	env := memenv.New(nil)
	env.Handle("make slow", func(ctx context.Context, req sandbox.ExecRequest) (sandbox.ExecResult, error) {
		<-ctx.Done() // only the wall-clock limit ends it
		return sandbox.ExecResult{}, ctx.Err()
	})
	var asked []agent.StopReason
	r, m := newRun(env, calls(call("bash", map[string]any{"command": "make slow"})), finish("ok"))
	r.Task.TestCommand = ""
	r.Limits.Timeout = 20 * time.Millisecond
	r.OnLimit = func(reason agent.StopReason) bool {
		asked = append(asked, reason)
		return len(asked) == 1
	}
	out, _ := agent.New(agent.Config{}).Run(context.Background(), r)
	if out.Reason != agent.StopFinished || len(m.requests()) != 2 || len(asked) != 1 || asked[0] != agent.StopTimeout {
		t.Errorf("reason %s after %d model calls; asked %v", out.Reason, len(m.requests()), asked)
	}
}
