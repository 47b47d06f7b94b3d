package agent_test

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/wrenchworks/wrench/agent"
	"github.com/wrenchworks/wrench/agent/memenv"
	"github.com/wrenchworks/wrench/sandbox"
	"github.com/wrenchworks/wrench/task"
)

// benchModel is the scripted model in-process: it hands out prepared
// replies and does no work of its own.
type benchModel struct {
	replies []agent.ModelResponse
	i       int
}

func (m *benchModel) Chat(ctx context.Context, _ agent.ModelRequest, _ func(agent.StreamEvent)) (agent.ModelResponse, error) {
	r := m.replies[m.i%len(m.replies)]
	m.i++
	return r, ctx.Err()
}

const benchTurns = 20

// benchReplies is a typical turn mix: read, search, run, edit, list.
func benchReplies() []agent.ModelResponse {
	var out []agent.ModelResponse
	for i := 0; i < benchTurns-1; i++ {
		var c agent.ToolCall
		switch i % 5 {
		case 0:
			c = view("src/calc.go")
		case 1:
			c = call("grep", map[string]any{"pattern": "func \\w+", "include": "*.go"})
		case 2:
			c = call("bash", map[string]any{"command": fmt.Sprintf("echo step %d", i)})
		case 3:
			c = edit("src/calc.go", fmt.Sprintf("v%d := %d", i-3, i-3), fmt.Sprintf("v%d := %d", i, i))
		case 4:
			c = call("ls", map[string]any{"path": "src"})
		}
		c.ID = fmt.Sprintf("call_%d", i)
		out = append(out, agent.ModelResponse{
			Message:      agent.Message{Role: agent.RoleAssistant, Content: "Next step.", ToolCalls: []agent.ToolCall{c}},
			FinishReason: agent.FinishToolCalls,
			Usage:        agent.TokenUsage{InputTokens: 2000, OutputTokens: 50},
		})
	}
	f := finish("done").resp
	return append(out, f)
}

func benchFiles() map[string]string {
	src := "package calc\n\nv0 := 0\n"
	for i := 0; i < 200; i++ {
		src += fmt.Sprintf("func F%d(a, b int) int { return a + b + %d }\n", i, i)
	}
	return map[string]string{"src/calc.go": src, "src/other.go": "package calc\n\nfunc Other() {}\n", "README.md": "# calc\n"}
}

// BenchmarkTurn measures the harness's own cost per turn: the model is
// scripted in-process and the tools act on an in-memory environment, so
// model and command time are (nearly) zero. Each op is one run of 20
// turns; p50-ns/turn and p99-ns/turn come from the turn-start events,
// allocs/turn from the allocator.
func BenchmarkTurn(b *testing.B) {
	a := agent.New(agent.Config{})
	replies := benchReplies()
	files := benchFiles()
	var samples []time.Duration
	var last time.Time
	onEvent := func(e task.Event) {
		if e.Kind != task.EventTurn {
			return
		}
		now := time.Now()
		if e.Turn > 1 {
			samples = append(samples, now.Sub(last))
		}
		last = now
	}
	var ms0, ms1 runtime.MemStats
	b.ReportAllocs()
	runtime.ReadMemStats(&ms0)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		env := memenv.New(files)
		out, err := a.Run(context.Background(), &agent.Run{
			Task:      task.Task{ID: "bench", Instruction: "Bump the counters."},
			ModelName: "scripted",
			Model:     &benchModel{replies: replies},
			Env:       env,
			EnvInfo:   envInfo,
			OnEvent:   onEvent,
			Verify:    agent.VerifyNever,
		})
		if err != nil || out.Reason != agent.StopFinished || out.Usage.Turns != benchTurns {
			b.Fatalf("run: %v %+v", err, out)
		}
	}
	b.StopTimer()
	runtime.ReadMemStats(&ms1)
	slices.Sort(samples)
	if len(samples) > 0 {
		b.ReportMetric(float64(samples[len(samples)/2].Nanoseconds()), "p50-ns/turn")
		b.ReportMetric(float64(samples[len(samples)*99/100].Nanoseconds()), "p99-ns/turn")
	}
	b.ReportMetric(float64(ms1.Mallocs-ms0.Mallocs)/float64(b.N*benchTurns), "allocs/turn")
	b.ReportMetric(float64(ms1.TotalAlloc-ms0.TotalAlloc)/float64(b.N*benchTurns), "B/turn")
}

// BenchmarkCancel measures how long Run takes to return once its context
// is cancelled while the model call, or a command, is blocked (both honour
// ctx, as Model and Env must). The target is well under a second.
func BenchmarkCancel(b *testing.B) {
	for _, where := range []string{"model", "command"} {
		b.Run(where, func(b *testing.B) {
			a := agent.New(agent.Config{})
			var lat []time.Duration
			for i := 0; i < b.N; i++ {
				env := memenv.New(nil)
				started := make(chan struct{})
				env.Handle("block", func(ctx context.Context, _ sandbox.ExecRequest) (sandbox.ExecResult, error) {
					close(started)
					<-ctx.Done()
					return sandbox.ExecResult{}, ctx.Err()
				})
				var m agent.Model = &benchModel{replies: []agent.ModelResponse{calls(call("bash", map[string]any{"command": "block"})).resp}}
				if where == "model" {
					m = &blockingModel{started: started, ctxErr: make(chan error, 1)}
				}
				ctx, cancel := context.WithCancel(context.Background())
				done := make(chan time.Time)
				go func() {
					_, _ = a.Run(ctx, &agent.Run{Task: task.Task{ID: "c"}, Model: m, Env: env, EnvInfo: envInfo, Verify: agent.VerifyNever})
					done <- time.Now()
				}()
				<-started
				t0 := time.Now()
				cancel()
				lat = append(lat, (<-done).Sub(t0))
			}
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Nanoseconds()), "p50-ns/cancel")
			b.ReportMetric(float64(lat[len(lat)-1].Nanoseconds()), "max-ns/cancel")
		})
	}
}
