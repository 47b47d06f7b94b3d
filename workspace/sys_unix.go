//go:build unix

package workspace

import (
	"syscall"

	"golang.org/x/sys/unix"
)

// Single-component *at system calls for the checkout's hot loop. Names
// never contain a slash; callers pass O_NOFOLLOW or AT_SYMLINK_NOFOLLOW.

// fileStat is the part of stat(2) the checkout, the index and the stat
// cache use.
type fileStat struct {
	dev, ino     uint64
	mode         uint32
	uid, gid     uint32
	size         int64
	mtime, ctime int64 // nanoseconds since the epoch
}

func fileStatOf(st *unix.Stat_t) fileStat {
	return fileStat{
		dev: uint64(st.Dev), ino: st.Ino, mode: uint32(st.Mode), uid: st.Uid, gid: st.Gid, size: st.Size,
		mtime: st.Mtim.Nano(), ctime: st.Ctim.Nano(),
	}
}

func openat(dirfd int, name string, flags int, mode uint32) (int, error) {
	for {
		fd, err := unix.Openat(dirfd, name, flags, mode)
		if err != syscall.EINTR {
			return fd, err
		}
	}
}

func mkdirat(dirfd int, name string, mode uint32) error {
	return unix.Mkdirat(dirfd, name, mode)
}

func symlinkat(target string, dirfd int, name string) error {
	return unix.Symlinkat(target, dirfd, name)
}

func fchownat(dirfd int, name string, uid, gid int) error {
	return unix.Fchownat(dirfd, name, uid, gid, unix.AT_SYMLINK_NOFOLLOW)
}

func fstatat(dirfd int, name string) (fileStat, error) {
	var st unix.Stat_t
	if err := unix.Fstatat(dirfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return fileStat{}, err
	}
	return fileStatOf(&st), nil
}

func fstat(fd int) (fileStat, error) {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return fileStat{}, err
	}
	return fileStatOf(&st), nil
}
