package main

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"time"
)

// statusLine shows what a long job is doing to a person watching it. On a
// terminal it is one line redrawn in place, with the elapsed time updated
// every second; otherwise each step is a plain line, so logs and CI output
// read top to bottom. Lines that must stay (warnings) are printed above
// the live line. It is safe for concurrent use.
type statusLine struct {
	w     io.Writer
	live  bool
	label string
	start time.Time

	mu   sync.Mutex
	step string
	open bool // a live line is on screen

	stop chan struct{}
	done chan struct{}
}

// newStatusLine starts a status line for the job label on w; live redraws
// in place (use isTerminal). Close it when the job ends.
func newStatusLine(w io.Writer, live bool, label string) *statusLine {
	s := &statusLine{w: w, live: live, label: label, start: time.Now(), stop: make(chan struct{}), done: make(chan struct{})}
	if !live {
		close(s.done)
		return s
	}
	go func() {
		defer close(s.done)
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-s.stop:
				return
			case <-t.C:
				s.mu.Lock()
				s.draw()
				s.mu.Unlock()
			}
		}
	}()
	return s
}

// Step says what the job does now.
func (s *statusLine) Step(step string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if step == s.step {
		return
	}
	s.step = step
	if s.live {
		s.draw()
		return
	}
	fmt.Fprintf(s.w, "%s: %s (%s)\n", s.label, step, s.elapsed())
}

// Print writes a line that stays, above the live line.
func (s *statusLine) Print(line string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.open {
		fmt.Fprint(s.w, "\r\x1b[K")
		s.open = false
	}
	fmt.Fprintln(s.w, line)
	if s.live {
		s.draw()
	}
}

// Close stops the redraws and clears the live line.
func (s *statusLine) Close() {
	s.mu.Lock()
	if s.live {
		select {
		case <-s.stop:
		default:
			close(s.stop)
		}
	}
	s.mu.Unlock()
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.open {
		fmt.Fprint(s.w, "\r\x1b[K")
		s.open = false
	}
}

// draw redraws the live line; s.mu is held.
func (s *statusLine) draw() {
	if s.step == "" {
		return
	}
	fmt.Fprintf(s.w, "\r\x1b[K%s", clip(fmt.Sprintf("%s: %s (%s)", s.label, s.step, s.elapsed()), 150))
	s.open = true
}

func (s *statusLine) elapsed() time.Duration { return time.Since(s.start).Round(time.Second) }

// lineWriter calls fn with every complete line written to it (a trailing
// "\r" dropped); the rest waits for its newline. It is safe for concurrent
// use.
type lineWriter struct {
	mu   sync.Mutex
	buf  []byte
	fn   func(line string)
	keep int // bytes of an unterminated line kept, at most
}

func newLineWriter(fn func(line string)) *lineWriter { return &lineWriter{fn: fn, keep: 64 << 10} }

func (lw *lineWriter) Write(p []byte) (int, error) {
	lw.mu.Lock()
	defer lw.mu.Unlock()
	lw.buf = append(lw.buf, p...)
	for {
		i := strings.IndexAny(string(lw.buf), "\n\r")
		if i < 0 {
			break
		}
		if line := strings.TrimSpace(string(lw.buf[:i])); line != "" {
			lw.fn(line)
		}
		lw.buf = lw.buf[i+1:]
	}
	if len(lw.buf) > lw.keep {
		lw.buf = lw.buf[len(lw.buf)-lw.keep:]
	}
	return len(p), nil
}
