package workspace

import (
	"syscall"

	"golang.org/x/sys/unix"
)

// Single-component *at system calls for the checkout's hot loop. Names
// never contain a slash; callers pass O_NOFOLLOW or AT_SYMLINK_NOFOLLOW.

func openat(dirfd int, name string, flags int, mode uint32) (int, error) {
	for {
		fd, err := unix.Openat(dirfd, name, flags, mode)
		if err != syscall.EINTR {
			return fd, err
		}
	}
}

func symlinkat(target string, dirfd int, name string) error {
	return unix.Symlinkat(target, dirfd, name)
}

func fchownat(dirfd int, name string, uid, gid int) error {
	return unix.Fchownat(dirfd, name, uid, gid, unix.AT_SYMLINK_NOFOLLOW)
}

func fstatat(dirfd int, name string, st *syscall.Stat_t) error {
	var ust unix.Stat_t
	if err := unix.Fstatat(dirfd, name, &ust, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return err
	}
	*st = syscall.Stat_t{
		Dev: ust.Dev, Ino: ust.Ino, Nlink: ust.Nlink, Mode: ust.Mode, Uid: ust.Uid, Gid: ust.Gid,
		Size: ust.Size, Mtim: syscall.Timespec(ust.Mtim), Ctim: syscall.Timespec(ust.Ctim),
	}
	return nil
}

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
