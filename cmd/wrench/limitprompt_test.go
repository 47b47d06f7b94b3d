package main

import (
	"bufio"
	"bytes"
	"strings"
	"testing"

	"github.com/wrenchworks/wrench/agent"
	"github.com/wrenchworks/wrench/task"
)

func TestLimitPromptAsks(t *testing.T) {
	var out bytes.Buffer
	ask := limitPrompt(bufio.NewReader(strings.NewReader("y\nno\n")), &out, task.Limits{MaxTurns: 20, MaxCostUSD: 0.5})
	if !ask(agent.StopMaxTurns) {
		t.Error("y did not go on")
	}
	if ask(agent.StopMaxCost) {
		t.Error("no went on")
	}
	if ask(agent.StopMaxTurns) {
		t.Error("the end of the input went on")
	}
	for _, want := range []string{"the run reached its turn limit (20 turns). Go on with as much again? [y/N]", "its cost limit ($0.50)"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("prompt lacks %q:\n%s", want, out.String())
		}
	}
}

// TestOnLimitOnlyAsksATerminal: a script (stdin not a terminal) is never
// blocked on a question; --on-limit stop never asks; a bad value is bad
// input.
func TestOnLimitOnlyAsksATerminal(t *testing.T) {
	env := &cliEnv{stdin: strings.NewReader("y\n"), stderr: &bytes.Buffer{}, getenv: noEnv}
	in := bufio.NewReader(env.stdin)
	for _, mode := range []string{onLimitAsk, onLimitStop} {
		if f, err := onLimitFor(mode, in, env, task.Limits{}); f != nil || err != nil {
			t.Errorf("%s off a terminal: %v, %v", mode, f != nil, err)
		}
	}
	if _, err := onLimitFor("maybe", in, env, task.Limits{}); err == nil || !strings.Contains(err.Error(), "--on-limit") {
		t.Errorf("bad value: %v", err)
	}
	_, stderr, code := runDispatch(noEnv, "run", "--repo", t.TempDir(), "--task", "x", "--on-limit", "maybe")
	if code != exitBadInput || !strings.Contains(stderr, `--on-limit "maybe"`) {
		t.Errorf("wrench run --on-limit maybe: exit %d, %s", code, stderr)
	}
}
