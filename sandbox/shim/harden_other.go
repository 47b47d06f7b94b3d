//go:build !linux

package shim

// Harden does nothing outside Linux (sandboxes are Linux containers).
func Harden() error { return nil }

// LimitFileSize is a no-op off Linux.
func LimitFileSize(int64) error { return nil }
