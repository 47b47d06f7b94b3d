package worker

import (
	"strings"
	"sync"
	"time"

	"github.com/wrenchworks/wrench/task"
)

// progressEvery is how often a phase's progress becomes an event.
const progressEvery = time.Second

// phaseProgress turns a phase's progress output (a git server's
// "Receiving objects:  45% (450/1000)" lines, separated by "\r" or "\n")
// into log events of that phase (Phase set): at most one a second, and
// every line that ends a stage ("…, done."). People watching a large clone
// see it move; the events are bounded whatever the server sends.
type phaseProgress struct {
	r     *taskRun
	phase string

	mu   sync.Mutex
	buf  []byte
	last time.Time
}

func (r *taskRun) progress(phase string) *phaseProgress { return &phaseProgress{r: r, phase: phase} }

func (p *phaseProgress) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.buf = append(p.buf, b...)
	for {
		i := strings.IndexAny(string(p.buf), "\r\n")
		if i < 0 {
			break
		}
		p.line(strings.TrimSpace(string(p.buf[:i])))
		p.buf = p.buf[i+1:]
	}
	if len(p.buf) > 4096 { // a "line" that never ends
		p.buf = p.buf[len(p.buf)-4096:]
	}
	return len(b), nil
}

// line emits one progress line when it is due; p.mu is held.
func (p *phaseProgress) line(s string) {
	if s == "" {
		return
	}
	now := time.Now()
	if !strings.HasSuffix(s, "done.") && now.Sub(p.last) < progressEvery {
		return
	}
	p.last = now
	p.r.emit(task.Event{Kind: task.EventLog, Phase: p.phase, Text: strings.TrimPrefix(s, "remote: ")})
}
