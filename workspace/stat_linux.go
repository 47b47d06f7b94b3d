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
		dev: st.Dev, ino: st.Ino, mode: st.Mode, uid: st.Uid, gid: st.Gid, size: st.Size,
		mtime: st.Mtim.Nano(), ctime: st.Ctim.Nano(),
	}, true
}
