package shim

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"syscall"
	"time"

	"github.com/wrenchworks/wrench/sandbox"
)

// credential parses "uid:gid" for an exec as another user.
func credential(user string) (*syscall.Credential, error) {
	var uid, gid uint32
	if _, err := fmt.Sscanf(user, "%d:%d", &uid, &gid); err != nil {
		return nil, fmt.Errorf("exec: user %q: want uid:gid: %w", user, errInvalidReq)
	}
	return &syscall.Credential{Uid: uid, Gid: gid, Groups: []uint32{}}, nil
}

// runExec runs one command with the shell in its own process group and
// returns when the shell has exited and its output is drained (or after a
// short grace when a process that left the group still holds the pipe).
// Processes still in the group when the shell exits are killed.
func (s *server) runExec(ctx context.Context, req sandbox.ExecRequest, env map[string]string) (sandbox.ExecResult, error) {
	dir, err := s.execDir(req.Dir)
	if err != nil {
		return sandbox.ExecResult{}, err
	}
	timeout := s.opts.ExecTimeout
	if req.Timeout > 0 {
		timeout = req.Timeout
	}
	maxOut := s.opts.MaxOutput
	if req.MaxOutput > 0 {
		maxOut = req.MaxOutput
	}

	pr, pw, err := os.Pipe()
	if err != nil {
		return sandbox.ExecResult{}, fmt.Errorf("exec: output pipe: %w", err)
	}
	defer pr.Close()
	cmd, stdinW, err := s.command(req, dir, env, pw)
	if err != nil {
		pw.Close()
		return sandbox.ExecResult{}, err
	}
	if stdinW != nil {
		defer cmd.Stdin.(*os.File).Close()
		defer stdinW.Close()
	}

	start := time.Now()
	err = cmd.Start()
	pw.Close()
	if err != nil {
		err = fmt.Errorf("exec: start %s: %w", s.shell, err)
		if res, ok := startFailure(err); ok {
			return res, nil
		}
		return sandbox.ExecResult{}, err
	}
	pgid := cmd.Process.Pid
	group := &execGroup{pgid: pgid}
	s.addGroup(group)
	stdinDone := make(chan struct{})
	if stdinW != nil {
		cmd.Stdin.(*os.File).Close()
		go func() { // ends when written, or when stdinW is closed below
			defer close(stdinDone)
			stdinW.Write(req.Stdin)
			stdinW.Close()
		}()
	} else {
		close(stdinDone)
	}
	out := newCapture(maxOut)
	drained := make(chan struct{})
	go func() {
		defer close(drained)
		io.Copy(out, pr)
	}()
	exited := make(chan *os.ProcessState, 1)
	go func() {
		cmd.Wait()
		exited <- cmd.ProcessState
	}()

	state, timedOut, canceled := s.await(ctx, pgid, exited, timeout)
	// Stragglers left in the group (backgrounded, ignoring SIGTERM) go now.
	syscall.Kill(-pgid, syscall.SIGKILL)
	s.removeGroup(group) // before the shell's pid can be reused
	select {
	case <-drained:
	case <-time.After(s.opts.DrainGrace):
		// Someone outside the group still holds the pipe: stop reading.
		pr.Close()
		<-drained
	}
	if stdinW != nil {
		stdinW.Close()
	}
	<-stdinDone
	if canceled {
		return sandbox.ExecResult{}, fmt.Errorf("exec: %w", errCanceled)
	}
	if limit := s.killedByGuard(group); limit > 0 {
		out.Write([]byte(pidsNote(limit, s.opts.PidsSustain)))
	}
	output, dropped := out.Bytes()
	return sandbox.ExecResult{
		ExitCode: exitCode(state),
		Output:   output,
		Dropped:  dropped,
		TimedOut: timedOut,
		Duration: time.Since(start),
	}, nil
}

// await returns the shell's state once it exits; at its timeout or when
// ctx ends first, it kills the group (killGroup) and says which it was.
func (s *server) await(ctx context.Context, pgid int, exited <-chan *os.ProcessState, timeout time.Duration) (state *os.ProcessState, timedOut, canceled bool) {
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case state = <-exited:
		return state, false, false
	case <-timer.C:
		timedOut = true
	case <-ctx.Done():
		canceled = true
	}
	return s.killGroup(pgid, exited), timedOut, canceled
}

// command is the shell command of req, in its own process group, writing
// its output to pw. stdin is the write end of its input pipe when req has
// input; the caller closes it and the command's read end.
func (s *server) command(req sandbox.ExecRequest, dir string, env map[string]string, pw *os.File) (cmd *exec.Cmd, stdin *os.File, err error) {
	cmd = exec.Command(s.shell, "-c", req.Command)
	cmd.Dir = dir
	cmd.Env = mergeEnv(s.opts.Env, env)
	cmd.Stdout = pw
	cmd.Stderr = pw
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if req.User != "" {
		cred, err := credential(req.User)
		if err != nil {
			return nil, nil, err
		}
		cmd.SysProcAttr.Credential = cred
	}
	if req.Stdin != nil {
		sr, sw, err := os.Pipe()
		if err != nil {
			return nil, nil, fmt.Errorf("exec: stdin pipe: %w", err)
		}
		cmd.Stdin, stdin = sr, sw
	}
	return cmd, stdin, nil
}

// killGroup sends SIGTERM to the group, then SIGKILL after the grace, and
// returns the shell's state once it has exited.
func (s *server) killGroup(pgid int, exited <-chan *os.ProcessState) *os.ProcessState {
	syscall.Kill(-pgid, syscall.SIGTERM)
	grace := time.NewTimer(s.opts.KillGrace)
	defer grace.Stop()
	select {
	case st := <-exited:
		return st
	case <-grace.C:
	}
	syscall.Kill(-pgid, syscall.SIGKILL)
	return <-exited
}

// exitCode reports a signalled shell the way a shell would: 128+signal.
func exitCode(st *os.ProcessState) int {
	if ws, ok := st.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return st.ExitCode()
}

// execDir resolves an exec's working directory inside the workspace.
func (s *server) execDir(dir string) (string, error) {
	rel, err := s.rel(dir)
	if err != nil {
		return "", err
	}
	fi, err := s.root.Stat(rel)
	if err != nil {
		return "", fmt.Errorf("exec dir %s: %w", dir, classify(err))
	}
	if !fi.IsDir() {
		return "", fmt.Errorf("exec dir %s: %w", dir, sandbox.ErrNotDir)
	}
	return filepath.Join(s.opts.WorkDir, rel), nil
}

// mergeEnv overlays extra on base (both KEY=VALUE), sorted for stable output.
func mergeEnv(base []string, extra map[string]string) []string {
	if len(extra) == 0 {
		return base
	}
	m := make(map[string]string, len(base)+len(extra))
	for _, kv := range base {
		k, v, _ := cutEnv(kv)
		m[k] = v
	}
	for k, v := range extra {
		m[k] = v
	}
	out := make([]string, 0, len(m))
	for k, v := range m {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out
}

func cutEnv(kv string) (string, string, bool) {
	for i := 1; i < len(kv); i++ { // a leading '=' belongs to the name
		if kv[i] == '=' {
			return kv[:i], kv[i+1:], true
		}
	}
	return kv, "", false
}

// detectShell picks bash when the image has it, sh otherwise.
func detectShell() string {
	for _, sh := range []string{"/bin/bash", "/usr/bin/bash"} {
		if fi, err := os.Stat(sh); err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0 {
			return sh
		}
	}
	return "/bin/sh"
}
