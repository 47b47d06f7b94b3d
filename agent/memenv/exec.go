package memenv

import (
	"context"
	"fmt"
	"io/fs"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/wrenchworks/wrench/sandbox"
)

// Exec implements sandbox.Env: a registered handler, else the fallback, else
// a built-in fake command; anything else exits 127. req.Dir must be a
// directory of the workspace.
func (e *Env) Exec(ctx context.Context, req sandbox.ExecRequest) (sandbox.ExecResult, error) {
	if err := ctx.Err(); err != nil {
		return sandbox.ExecResult{}, err
	}
	cmd := strings.TrimSpace(req.Command)
	e.mu.Lock()
	dir, f, err := e.lookup("exec dir", req.Dir)
	if err == nil && f != nil {
		err = &fs.PathError{Op: "exec dir", Path: dir, Err: sandbox.ErrNotDir}
	}
	if err != nil {
		e.mu.Unlock()
		return sandbox.ExecResult{}, err
	}
	e.commands = append(e.commands, cmd)
	var fn ExecFunc
	for _, h := range e.handlers {
		if cmd == h.prefix || strings.HasPrefix(cmd, h.prefix+" ") {
			fn = h.fn
			break
		}
	}
	if fn == nil {
		fn = e.fallback
	}
	e.mu.Unlock()
	if fn != nil {
		return fn(ctx, req)
	}
	return e.builtin(ctx, req, dir, cmd)
}

// builtin runs one of the fake commands in dir.
func (e *Env) builtin(ctx context.Context, req sandbox.ExecRequest, dir, cmd string) (sandbox.ExecResult, error) {
	name, rest, _ := strings.Cut(cmd, " ")
	rest = strings.TrimSpace(rest)
	res := func(code int, out string) (sandbox.ExecResult, error) {
		return sandbox.ExecResult{ExitCode: code, Output: []byte(out)}, nil
	}
	switch name {
	case "true":
		return res(0, "")
	case "false":
		return res(1, "")
	case "pwd":
		return res(0, path.Join(sandbox.WorkDir, dir)+"\n")
	case "echo":
		return res(0, unquote(rest)+"\n")
	case "exit":
		n, err := strconv.Atoi(rest)
		if err != nil {
			return res(2, "exit: numeric argument required\n")
		}
		return res(n, "")
	case "cat":
		if rest == "" {
			return res(0, string(req.Stdin))
		}
		b, err := e.ReadFile(ctx, path.Join(dir, unquote(rest)))
		if err != nil {
			return res(1, fmt.Sprintf("cat: %s: No such file or directory\n", rest))
		}
		return res(0, string(b))
	case "sleep":
		return sleep(ctx, req, rest)
	}
	return res(127, fmt.Sprintf("bash: %s: command not found\n", name))
}

// sleep waits arg seconds, or until the request's timeout or ctx.
func sleep(ctx context.Context, req sandbox.ExecRequest, arg string) (sandbox.ExecResult, error) {
	secs, err := strconv.ParseFloat(arg, 64)
	if err != nil {
		return sandbox.ExecResult{ExitCode: 1, Output: []byte("sleep: invalid time interval\n")}, nil
	}
	t := time.NewTimer(time.Duration(secs * float64(time.Second)))
	defer t.Stop()
	var timeout <-chan time.Time
	if req.Timeout > 0 {
		tt := time.NewTimer(req.Timeout)
		defer tt.Stop()
		timeout = tt.C
	}
	select {
	case <-ctx.Done():
		return sandbox.ExecResult{}, ctx.Err()
	case <-timeout:
		return sandbox.ExecResult{ExitCode: 124, Output: []byte{}, TimedOut: true}, nil
	case <-t.C:
		return sandbox.ExecResult{Output: []byte{}}, nil
	}
}

func unquote(s string) string {
	if len(s) >= 2 && (s[0] == '"' || s[0] == '\'') && s[len(s)-1] == s[0] {
		return s[1 : len(s)-1]
	}
	return s
}
