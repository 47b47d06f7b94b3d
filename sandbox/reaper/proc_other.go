//go:build !linux

package reaper

import (
	"errors"
	"syscall"
)

// processInfo reports whether pid runs; its state and start time are not
// known here.
func processInfo(pid int) Process {
	err := syscall.Kill(pid, 0)
	return Process{Running: err == nil || errors.Is(err, syscall.EPERM)}
}
