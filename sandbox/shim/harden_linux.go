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
