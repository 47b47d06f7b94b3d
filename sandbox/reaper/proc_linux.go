package reaper

import (
	"bytes"
	"errors"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// processInfo reports whether pid runs and, when /proc tells, when it
// started.
func processInfo(pid int) (bool, time.Time) {
	if err := syscall.Kill(pid, 0); err != nil && !errors.Is(err, syscall.EPERM) {
		return false, time.Time{}
	}
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true, time.Time{}
	}
	// Field 22 is the start time in clock ticks after boot; fields after
	// the command name (which may hold spaces) start after the last ')'.
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return true, time.Time{}
	}
	fields := strings.Fields(string(stat[i+1:]))
	if len(fields) < 20 {
		return true, time.Time{}
	}
	ticks, err := strconv.ParseInt(fields[19], 10, 64)
	if err != nil {
		return true, time.Time{}
	}
	boot, ok := bootTime()
	if !ok {
		return true, time.Time{}
	}
	const hz = 100 // USER_HZ is 100 on every Linux ABI Go supports
	return true, boot.Add(time.Duration(ticks) * time.Second / hz)
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
