package reaper

import (
	"errors"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/wrenchworks/wrench/sandbox"
)

// processInfo tells whether pid runs, whether it is a zombie, and when it
// started (when /proc tells).
func processInfo(pid int) Process {
	if err := syscall.Kill(pid, 0); err != nil && !errors.Is(err, syscall.EPERM) {
		return Process{}
	}
	st, err := sandbox.ReadProcStat(pid)
	if err != nil {
		return Process{Running: true}
	}
	p := Process{Running: st.State != 'X', Zombie: st.State == 'Z', Start: st.Start}
	if boot, ok := bootTime(); ok {
		const hz = 100 // USER_HZ is 100 on every Linux ABI Go supports
		p.Started = boot.Add(time.Duration(st.Start) * time.Second / hz)
	}
	return p
}

func bootTime() (time.Time, bool) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return time.Time{}, false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "btime "); ok {
			n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			if err != nil {
				return time.Time{}, false
			}
			return time.Unix(n, 0), true
		}
	}
	return time.Time{}, false
}
