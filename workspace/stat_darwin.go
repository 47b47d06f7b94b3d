package workspace

import (
	"io/fs"
	"syscall"
)

// sysStat extracts the stat fields of a FileInfo from os.
func sysStat(fi fs.FileInfo) (fileStat, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fileStat{}, false
	}
	return fileStat{
		dev: uint64(st.Dev), ino: st.Ino, mode: uint32(st.Mode), uid: st.Uid, gid: st.Gid, size: st.Size,
		mtime: st.Mtimespec.Nano(), ctime: st.Ctimespec.Nano(),
	}, true
}
