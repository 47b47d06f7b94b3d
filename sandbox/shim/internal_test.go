package shim

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestCapture(t *testing.T) {
	tests := []struct {
		name        string
		max         int
		writes      []string
		want        string
		wantDropped int64
	}{
		{"fits", 10, []string{"abc", "def"}, "abcdef", 0},
		{"exact", 6, []string{"abcdef"}, "abcdef", 0},
		{"one big write", 6, []string{"abcdefghij"}, "abchij", 4},
		{"many small writes", 6, []string{"a", "b", "c", "d", "e", "f", "g", "h", "i", "j"}, "abchij", 4},
		{"wrap across writes", 7, []string{"abcd", "efgh", "ijk", "lm"}, "abcdklm", 6},
		{"odd max keeps more head", 5, []string{"0123456789"}, "01289", 5},
		{"max 1", 1, []string{"xyz"}, "x", 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newCapture(tt.max)
			for _, w := range tt.writes {
				c.Write([]byte(w))
			}
			got, dropped := c.Bytes()
			if string(got) != tt.want || dropped != tt.wantDropped {
				t.Errorf("got %q dropped %d, want %q dropped %d", got, dropped, tt.want, tt.wantDropped)
			}
		})
	}
}

// Every split of the same input gives the same head and tail.
func TestCaptureSplits(t *testing.T) {
	in := []byte(strings.Repeat("0123456789abcdefghij", 7))
	ref := newCapture(33)
	ref.Write(in)
	want, wantDropped := ref.Bytes()
	if !bytes.Equal(want, append(append([]byte{}, in[:17]...), in[len(in)-16:]...)) {
		t.Fatalf("reference capture = %q", want)
	}
	for step := 1; step < 40; step++ {
		c := newCapture(33)
		for i := 0; i < len(in); i += step {
			c.Write(in[i:min(i+step, len(in))])
		}
		got, dropped := c.Bytes()
		if !bytes.Equal(got, want) || dropped != wantDropped {
			t.Errorf("step %d: got %q (%d)", step, got, dropped)
		}
	}
}

func TestPidsWatch(t *testing.T) {
	t0 := time.Unix(1000, 0)
	type step struct {
		at              time.Duration
		current, refuse int64
		want            bool
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{"below the limit never fires", []step{{0, 10, 0, false}, {time.Second, 20, 0, false}, {5 * time.Second, 127, 0, false}}},
		{"at the limit for the sustain period", []step{{0, 128, 0, false}, {500 * time.Millisecond, 128, 0, false}, {time.Second, 128, 0, true}}},
		{"refused forks count though current dipped", []step{{0, 100, 1, false}, {500 * time.Millisecond, 120, 5, false}, {time.Second, 110, 9, false}, {1500 * time.Millisecond, 110, 12, true}}},
		{"first sample's refusals are history", []step{{0, 10, 50, false}, {time.Second, 10, 50, false}, {2 * time.Second, 10, 50, false}}},
		{"a break restarts the period", []step{{0, 128, 0, false}, {800 * time.Millisecond, 50, 0, false}, {time.Second, 128, 0, false}, {1500 * time.Millisecond, 128, 0, false}, {2 * time.Second, 128, 0, true}}},
		{"after firing the period starts over", []step{{0, 128, 0, false}, {time.Second, 128, 0, true}, {1200 * time.Millisecond, 128, 0, false}, {2200 * time.Millisecond, 128, 0, true}}},
		{"no events file: current alone", []step{{0, 128, -1, false}, {time.Second, 128, -1, true}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := &pidsWatch{sustain: time.Second, lastRefused: -1}
			for i, st := range tt.steps {
				got := w.observe(pidsSample{limit: 128, current: st.current, refused: st.refuse}, t0.Add(st.at))
				if got != st.want {
					t.Errorf("step %d (%+v): observe = %v, want %v", i, st, got, st.want)
				}
			}
		})
	}
}

func TestPidsCgroupSample(t *testing.T) {
	dir := t.TempDir()
	write := func(name, v string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(v), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("pids.max", "max\n")
	if _, err := pidsCgroup(dir).sample(); err == nil {
		t.Errorf("sample of an unlimited cgroup: no error")
	}
	write("pids.max", "128\n")
	write("pids.current", "17\n")
	got, err := pidsCgroup(dir).sample()
	if err != nil || got != (pidsSample{limit: 128, current: 17, refused: -1}) {
		t.Errorf("without pids.events: %+v, %v", got, err)
	}
	write("pids.events", "max 42\n")
	got, err = pidsCgroup(dir).sample()
	if err != nil || got != (pidsSample{limit: 128, current: 17, refused: 42}) {
		t.Errorf("with pids.events: %+v, %v", got, err)
	}
}

func TestStartFailure(t *testing.T) {
	res, ok := startFailure(fmt.Errorf("exec: start /bin/bash: fork/exec /bin/bash: %w", syscall.EAGAIN))
	if !ok || res.ExitCode != 126 || !strings.Contains(string(res.Output), "process limit") {
		t.Errorf("EAGAIN: %+v %v, want a result about the process limit", res, ok)
	}
	if _, ok := startFailure(fmt.Errorf("exec: start: %w", fs.ErrNotExist)); ok {
		t.Errorf("a missing shell became a result")
	}
}

func TestReserveCount(t *testing.T) {
	cgroup := func(max, current string) pidsCgroup {
		dir := t.TempDir()
		os.WriteFile(filepath.Join(dir, "pids.max"), []byte(max), 0o644)
		os.WriteFile(filepath.Join(dir, "pids.current"), []byte(current), 0o644)
		return pidsCgroup(dir)
	}
	tests := []struct {
		name string
		want int
		cg   pidsCgroup
		out  int
	}{
		{"no cgroup", 16, "", 16},
		{"none wanted", -1, cgroup("128", "8"), 0},
		{"roomy limit", 16, cgroup("1024", "8"), 16},
		{"tight limit: a quarter of what is left", 16, cgroup("16", "8"), 2},
		{"limit already reached", 16, cgroup("16", "16"), 0},
		{"unlimited cgroup", 16, cgroup("max", "8"), 16},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := reserveCount(tt.want, tt.cg); got != tt.out {
				t.Errorf("reserveCount(%d) = %d, want %d", tt.want, got, tt.out)
			}
		})
	}
}
