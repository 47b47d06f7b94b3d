package shim

import (
	"fmt"
	"syscall"
)

// Harden makes the calling process non-dumpable, so processes of the same
// user (every command the sandbox runs) can neither ptrace it nor open its
// /proc/<pid>/fd and write into the protocol stream. Commands it starts
// are dumpable again (execve resets the flag). Call it once at the top of
// the in-sandbox main, not in a process that has other business.
func Harden() error {
	if _, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, syscall.PR_SET_DUMPABLE, 0, 0); errno != 0 {
		return fmt.Errorf("prctl(PR_SET_DUMPABLE): %w", errno)
	}
	return nil
}

// LimitFileSize makes the kernel refuse, to this process and every command
// it starts, to grow any file past max bytes (RLIMIT_FSIZE; the writer gets
// EFBIG, or SIGXFSZ when it does not handle it). 0 leaves the limit alone.
// A sandbox's disk watchdog samples; this bounds what one file can take
// between two samples, sparse or not.
func LimitFileSize(max int64) error {
	if max <= 0 {
		return nil
	}
	lim := syscall.Rlimit{Cur: uint64(max), Max: uint64(max)}
	if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &lim); err != nil {
		return fmt.Errorf("setrlimit(RLIMIT_FSIZE, %d): %w", max, err)
	}
	return nil
}
