package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// installShim copies the running executable into dataDir/bin and returns
// the copy's path, which the Docker backend bind-mounts into every sandbox
// as the in-sandbox helper.
//
// The engine resolves bind-mount sources on its own host, so when wrench
// itself runs in a container (Compose, Kubernetes with a Docker sidecar)
// its executable path means nothing to the engine. The data dir, by
// contrast, is mounted at the same path for both, which makes a copy there
// reachable. The copy is named by size and modification time, so it is made
// once per build and reused after.
func installShim(dataDir string) (string, error) {
	exe, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("find the wrench executable: %w", err)
	}
	if exe, err = filepath.EvalSymlinks(exe); err != nil {
		return "", fmt.Errorf("resolve the wrench executable: %w", err)
	}
	st, err := os.Stat(exe)
	if err != nil {
		return "", fmt.Errorf("stat %s: %w", exe, err)
	}
	dir := filepath.Join(dataDir, "bin")
	dst := filepath.Join(dir, fmt.Sprintf("wrench-%d-%d", st.Size(), st.ModTime().UnixNano()))
	if dst == exe {
		return dst, nil
	}
	if cur, err := os.Stat(dst); err == nil && cur.Size() == st.Size() {
		return dst, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("install shim: %w", err)
	}
	if err := copyExecutable(exe, dst); err != nil {
		return "", fmt.Errorf("install shim into %s: %w", dir, err)
	}
	return dst, nil
}

// copyExecutable copies src to dst through a temporary file and a rename,
// so a concurrent reader never sees a half-written binary.
func copyExecutable(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	tmp, err := os.CreateTemp(filepath.Dir(dst), ".wrench-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := io.Copy(tmp, in); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(0o755); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), dst)
}
