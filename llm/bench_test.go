package llm_test

import (
	"context"
	"strings"
	"testing"

	"github.com/wrenchworks/wrench/agent"
	"github.com/wrenchworks/wrench/llm"
)

// BenchmarkChat_Scripted measures one Chat round trip over loopback HTTP
// through the openai-go client and the scripted server: the cost the
// scripted model adds to every agent turn in tests and demos.
func BenchmarkChat_Scripted(b *testing.B) {
	final := strings.Repeat("The tests pass now; the fix was in calc.go. ", 20)
	history := []agent.Message{{Role: agent.RoleSystem, Content: strings.Repeat("You are a coding agent. ", 200)}}
	for i := 0; i < 20; i++ {
		history = append(history,
			agent.Message{Role: agent.RoleUser, Content: strings.Repeat("observation line\n", 50)},
			agent.Message{Role: agent.RoleAssistant, Content: "ok"})
	}
	history = append(history, agent.Message{Role: agent.RoleUser, Content: "go on"})
	for _, mode := range []string{"stream", "plain"} {
		b.Run(mode, func(b *testing.B) {
			s := mustParseB(b, "final: \""+final+"\"\nsteps: []\n")
			srv := startB(b, s)
			c, err := llm.New(llm.Config{BaseURL: srv.URL(), Model: "scripted", NoStream: mode == "plain"})
			if err != nil {
				b.Fatal(err)
			}
			req := agent.ModelRequest{Messages: history, Tools: tools}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := c.Chat(context.Background(), req, func(agent.StreamEvent) {}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
