//go:build !linux

package shim

// Harden does nothing outside Linux (sandboxes are Linux containers).
func Harden() error { return nil }
