package workspace

import (
	"syscall"

	"golang.org/x/sys/unix"
)

// copyRange copies size bytes from src at off to the current offset of
// dst, in the kernel (copy_file_range: a reflink where the file system
// can) with a user-space fallback.
func copyRange(src int, off int64, dst int, size int64) error {
	for size > 0 {
		n, err := unix.CopyFileRange(src, &off, dst, nil, int(min(size, 1<<30)), 0)
		if err == syscall.EINTR {
			continue
		}
		if err != nil || n == 0 {
			return copyRangeUser(src, off, dst, size)
		}
		size -= int64(n)
	}
	return nil
}
