package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/wrenchworks/wrench/agent"
	"github.com/wrenchworks/wrench/task"
)

// The --on-limit values of wrench run.
const (
	onLimitAsk  = "ask"  // on a terminal, ask whether to go on; otherwise stop
	onLimitStop = "stop" // stop at the limit, keeping the work so far
)

// limitWords says which limit a run reached, in a person's words.
func limitWords(reason agent.StopReason, l task.Limits) string {
	switch reason {
	case agent.StopMaxTurns:
		if l.MaxTurns > 0 {
			return fmt.Sprintf("its turn limit (%d turns)", l.MaxTurns)
		}
		return "its turn limit"
	case agent.StopMaxCost:
		return fmt.Sprintf("its cost limit ($%.2f)", l.MaxCostUSD)
	case agent.StopMaxTokens:
		return fmt.Sprintf("its token limit (%d tokens)", l.MaxTokens)
	case agent.StopFormatErrors:
		return "its limit of malformed replies in a row"
	case agent.StopTimeout:
		return "its time limit"
	}
	return string(reason)
}

// limitPrompt returns an agent.Run.OnLimit that asks on the terminal
// whether to go on with as much again of the limit; anything but y or yes,
// or the end of the input, stops. in is shared with the approval prompt.
func limitPrompt(in *bufio.Reader, out io.Writer, l task.Limits) func(agent.StopReason) bool {
	return func(reason agent.StopReason) bool {
		fmt.Fprintf(out, "\nwrench: the run reached %s. Go on with as much again? [y/N] ", limitWords(reason, l))
		line, err := in.ReadString('\n')
		if err != nil && line == "" {
			fmt.Fprintln(out)
			return false
		}
		switch strings.ToLower(strings.TrimSpace(line)) {
		case "y", "yes":
			return true
		}
		return false
	}
}

// onLimitFor picks wrench run's OnLimit: with --on-limit ask on a terminal
// (stdin and stderr), the prompt; otherwise nil, which stops at the limit.
func onLimitFor(mode string, in *bufio.Reader, env *cliEnv, l task.Limits) (func(agent.StopReason) bool, error) {
	switch mode {
	case onLimitStop:
		return nil, nil
	case onLimitAsk:
		if isTerminal(env.stderr, env) && isTerminalReader(env.stdin) {
			return limitPrompt(in, env.stderr, l), nil
		}
		return nil, nil
	}
	return nil, fmt.Errorf("--on-limit %q is not one of %s, %s", mode, onLimitAsk, onLimitStop)
}

// isTerminalReader reports whether r is a terminal a person types on.
func isTerminalReader(r io.Reader) bool {
	f, ok := r.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
