package agent

import "fmt"

// capCalls applies MaxCallsPerReply and MaxToolArgBytes to a reply's calls
// (a copy the run owns). It returns the calls to keep and, by index, the
// answer of each kept call that does not run. Calls past the cap are
// dropped but one, which answers for all of them, so that the history
// stays small; an oversized call's arguments are replaced by "{}", so that
// they reach neither the history nor the events.
func (s *runState) capCalls(calls []ToolCall) ([]ToolCall, map[int]string) {
	refused := map[int]string{}
	if limit := s.a.cfg.MaxCallsPerReply; len(calls) > limit {
		s.logEvent("the reply made %d tool calls; the first %d run, the rest are refused", len(calls), limit)
		refused[limit] = fmt.Sprintf("Not run: this reply made %d tool calls and at most %d run per reply; this call and the %d after it were not run. Make fewer calls per reply.",
			len(calls), limit, len(calls)-limit-1)
		calls = calls[:limit+1]
	}
	for i := range calls {
		c := &calls[i]
		if len(c.Arguments) > s.a.cfg.MaxToolArgBytes {
			if refused[i] == "" {
				refused[i] = fmt.Sprintf("Not run: the arguments of this %s call are %d bytes, over the cap of %d. Split the work over several smaller calls.",
					c.Name, len(c.Arguments), s.a.cfg.MaxToolArgBytes)
			}
			c.Arguments = "{}"
		}
	}
	return calls, refused
}
