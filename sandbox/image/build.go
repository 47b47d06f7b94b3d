package image

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// ErrNoMmdebstrap is returned when mmdebstrap is not installed and cannot
// be installed automatically.
var ErrNoMmdebstrap = errors.New("mmdebstrap not found: install it (Debian/Ubuntu: apt-get install mmdebstrap) and run the build again")

// run builds the root file system with mmdebstrap and streams it into the
// engine's import, tagged opts.Tag. If mmdebstrap fails, the import is
// aborted, so a partial file system is never tagged.
func (r recipe) run(ctx context.Context, eng Engine, opts Options, hash string, log *slog.Logger) error {
	bin, err := findMmdebstrap(ctx, log)
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "wrench-image-")
	if err != nil {
		return fmt.Errorf("temp dir: %w", err)
	}
	defer os.RemoveAll(dir)
	script := filepath.Join(dir, "customize.sh")
	if err := os.WriteFile(script, []byte(customizeScript), 0o700); err != nil {
		return fmt.Errorf("write hook: %w", err)
	}
	cacheDir, err := debCacheDir(opts)
	if err != nil {
		return err
	}

	progress := opts.Progress
	if progress == nil {
		progress = io.Discard
	}
	tail := &tailBuffer{max: 4 << 10}

	cmdCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	hookDir := ""
	if fi, err := os.Stat(eatmydataHooks); err == nil && fi.IsDir() {
		hookDir = eatmydataHooks
	}
	cmd := exec.CommandContext(cmdCtx, bin, r.mmdebstrapArgs(script, cacheDir, hookDir)...)
	// mmdebstrap cleans up its mounts and temp dir on SIGTERM; never SIGKILL
	// it first.
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = time.Minute
	// Its own process group: mmdebstrap signals its group when it is
	// interrupted, which must not reach this process.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Stderr = io.MultiWriter(progress, tail)
	pr, pw := io.Pipe()
	cmd.Stdout = pw
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start mmdebstrap: %w", err)
	}
	var (
		wg      sync.WaitGroup
		waitErr error
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		waitErr = cmd.Wait()
		if waitErr != nil {
			// Fail the import's request body so the engine discards it.
			pw.CloseWithError(fmt.Errorf("mmdebstrap: %w", waitErr))
			return
		}
		pw.Close()
	}()

	importErr := eng.ImportImage(ctx, pr, opts.Tag, r.changes(hash), "wrench sandbox image")
	if importErr != nil {
		cancel()
	}
	// Unblock the copy into the pipe if the import stopped reading.
	pr.CloseWithError(errors.New("import finished"))
	wg.Wait()
	if waitErr != nil {
		return fmt.Errorf("mmdebstrap: %w: %s", waitErr, strings.TrimSpace(tail.String()))
	}
	if importErr != nil {
		return importErr
	}
	return nil
}

// findMmdebstrap returns mmdebstrap's path, installing it with apt-get when
// it is missing and this process may do so.
func findMmdebstrap(ctx context.Context, log *slog.Logger) (string, error) {
	if p, err := exec.LookPath("mmdebstrap"); err == nil {
		return p, nil
	}
	apt, err := exec.LookPath("apt-get")
	if err != nil || os.Geteuid() != 0 {
		return "", ErrNoMmdebstrap
	}
	log.Info("installing mmdebstrap with apt-get")
	install := func() error {
		out, err := exec.CommandContext(ctx, apt, "install", "-y", "-q", "--no-install-recommends", "mmdebstrap").CombinedOutput()
		if err != nil {
			return fmt.Errorf("apt-get install mmdebstrap: %w: %s", err, lastLines(out, 5))
		}
		return nil
	}
	if err := install(); err != nil {
		if out, uerr := exec.CommandContext(ctx, apt, "update", "-q").CombinedOutput(); uerr != nil {
			return "", fmt.Errorf("%w (apt-get update: %v: %s)", ErrNoMmdebstrap, uerr, lastLines(out, 5))
		}
		if err := install(); err != nil {
			return "", fmt.Errorf("%w (%v)", ErrNoMmdebstrap, err)
		}
	}
	p, err := exec.LookPath("mmdebstrap")
	if err != nil {
		return "", ErrNoMmdebstrap
	}
	return p, nil
}

func debCacheDir(opts Options) (string, error) {
	if opts.NoCache {
		return "", nil
	}
	dir := opts.CacheDir
	if dir == "" {
		base, err := os.UserCacheDir()
		if err != nil {
			return "", nil // no cache dir to use: download every time
		}
		dir = filepath.Join(base, "wrench", "debs")
	}
	if strings.ContainsAny(dir, " \t\n'\"\\") {
		return "", fmt.Errorf("package cache dir %q: must not contain spaces or quotes", dir)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("package cache dir: %w", err)
	}
	return dir, nil
}

func lastLines(b []byte, n int) string {
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	buf bytes.Buffer
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf.Write(p)
	if over := t.buf.Len() - t.max; over > 0 {
		t.buf.Next(over)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.buf.String()
}
