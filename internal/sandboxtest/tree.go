package sandboxtest

import (
	"os"
	"path/filepath"
	"testing"
)

// WriteTree writes files (path -> content, mode 0644) under dir, creating
// parents: what a Factory backed by a host directory needs.
func WriteTree(t testing.TB, dir string, files map[string]string) {
	t.Helper()
	for p, content := range files {
		full := filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(full, 0o644); err != nil { // whatever the umask
			t.Fatal(err)
		}
	}
}
