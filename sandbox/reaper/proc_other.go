//go:build !linux

package reaper

import (
	"errors"
	"syscall"
	"time"
)

// processInfo reports whether pid runs; the start time is not known here.
func processInfo(pid int) (bool, time.Time) {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM), time.Time{}
}
