package shim

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/wrenchworks/wrench/sandbox"
)

// Options configure [Serve]. Zero values take the defaults noted.
type Options struct {
	// WorkDir is the workspace root (default "/workspace").
	WorkDir string
	// Shell runs commands with -c (default /bin/bash when present, else
	// /bin/sh).
	Shell string
	// Env is the base environment of commands (KEY=VALUE); requests may
	// add to it. Inside a container this is the container's own
	// environment, never the host's.
	Env []string
	// ExecTimeout is the per-command timeout when a request sets none
	// (default 10 minutes).
	ExecTimeout time.Duration
	// MaxOutput caps the output kept per command when a request sets none
	// (default 1 MiB).
	MaxOutput int
	// KillGrace is how long a timed-out command's group has between
	// SIGTERM and SIGKILL (default 1 s).
	KillGrace time.Duration
	// MaxReadFile is the largest file a read returns (default 128 MiB,
	// which still fits a frame once base64-encoded).
	MaxReadFile int64
	// DrainGrace is how long output is still read after the shell exited
	// and its group was killed, for processes that left the group but
	// hold the output pipe (default 200 ms).
	DrainGrace time.Duration
	// ReserveThreads is how many idle OS threads the shim makes at start,
	// so it keeps working when commands have used up the sandbox's pids
	// limit (default 16; negative for none).
	ReserveThreads int
	// PidsCgroup is the directory of the sandbox's pids cgroup (with
	// pids.max, pids.current, pids.events); "" finds it, "none" turns the
	// pids guard off. The guard is off, too, when no cgroup with a
	// numeric limit is found.
	PidsCgroup string
	// PidsInterval is how often the guard samples the cgroup while
	// commands run (default 200 ms), and PidsSustain how long the limit
	// must stay reached before the running commands' process groups are
	// killed (default 1 s).
	PidsInterval time.Duration
	PidsSustain  time.Duration
	// EgressListen and EgressSocket turn the egress forwarder on (both
	// set): connections accepted on EgressListen (host:port) are passed
	// to the proxy on the unix socket EgressSocket (see [Forward]), and
	// commands get sandbox.ProxyEnv pointing at it. It listens before the
	// hello and stops before Serve returns.
	EgressListen string
	EgressSocket string
}

func (o Options) withDefaults() Options {
	if o.WorkDir == "" {
		o.WorkDir = sandbox.WorkDir
	}
	if o.Shell == "" {
		o.Shell = detectShell()
	}
	if o.ExecTimeout <= 0 {
		o.ExecTimeout = 10 * time.Minute
	}
	if o.MaxOutput <= 0 {
		o.MaxOutput = 1 << 20
	}
	if o.KillGrace <= 0 {
		o.KillGrace = time.Second
	}
	if o.MaxReadFile <= 0 {
		o.MaxReadFile = 128 << 20
	}
	if o.DrainGrace <= 0 {
		o.DrainGrace = 200 * time.Millisecond
	}
	if o.ReserveThreads == 0 {
		o.ReserveThreads = 16
	}
	if o.PidsInterval <= 0 {
		o.PidsInterval = 200 * time.Millisecond
	}
	if o.PidsSustain <= 0 {
		o.PidsSustain = time.Second
	}
	return o
}

type server struct {
	opts  Options
	shell string
	root  *os.Root

	wmu sync.Mutex // serialises frames on w
	w   io.Writer

	mu       sync.Mutex
	inflight map[uint64]context.CancelFunc
	wg       sync.WaitGroup

	gmu    sync.Mutex
	groups map[*execGroup]struct{} // running commands

	ws wsState // the git workspace, once opened
}

// Serve answers requests read from r with responses written to w until r
// ends or ctx is done. It first sends the hello frame. Requests run
// concurrently; when Serve returns every request it started has finished
// (commands' process groups killed). Serve returns nil when r ended
// cleanly. When ctx ends first, a read of r may still be pending: the
// caller owns r and closes it (in the sandbox the process exits).
func Serve(ctx context.Context, r io.Reader, w io.Writer, opts Options) error {
	opts = opts.withDefaults()
	root, err := os.OpenRoot(opts.WorkDir)
	if err != nil {
		return fmt.Errorf("shim: open workspace: %w", err)
	}
	defer root.Close()
	cg := pidsCgroup(opts.PidsCgroup)
	if opts.PidsCgroup == "" || opts.PidsCgroup == "none" {
		cg = findPidsCgroup()
	}
	if n := reserveCount(opts.ReserveThreads, cg); n > 0 {
		reserveThreads(n)
	}
	if opts.EgressListen != "" && opts.EgressSocket != "" {
		fwd, err := Forward(opts.EgressListen, opts.EgressSocket)
		if err != nil {
			return err
		}
		defer fwd.Close()
		opts.Env = withProxyEnv(opts.Env, opts.EgressListen)
	}
	s := &server{opts: opts, shell: opts.Shell, root: root, w: w, inflight: map[uint64]context.CancelFunc{}, groups: map[*execGroup]struct{}{}}
	hello := &Hello{Version: ProtocolVersion, PID: os.Getpid(), UID: os.Getuid(), Shell: s.shell, WorkDir: opts.WorkDir}
	if err := s.send(&Response{Hello: hello}); err != nil {
		return fmt.Errorf("shim: send hello: %w", err)
	}

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if cg != "" && opts.PidsCgroup != "none" {
		s.wg.Add(1)
		go func() { // ends with ctx, before Serve returns
			defer s.wg.Done()
			s.guardPids(ctx, cg)
		}()
	}
	reqs := make(chan *Request)
	readErr := make(chan error, 1)
	go func() { // ends when r does; Serve's caller owns r
		br := bufio.NewReaderSize(r, 64<<10)
		for {
			req := new(Request)
			if err := readFrame(br, req); err != nil {
				readErr <- err
				close(reqs)
				return
			}
			select {
			case reqs <- req:
			case <-ctx.Done():
				readErr <- ctx.Err()
				close(reqs)
				return
			}
		}
	}()

	var result error
loop:
	for {
		select {
		case req, ok := <-reqs:
			if !ok {
				break loop
			}
			s.dispatch(ctx, req)
		case <-ctx.Done():
			result = ctx.Err()
			break loop
		}
	}
	cancel()
	s.wg.Wait()
	s.ws.close()
	if result == nil {
		if err := <-readErr; !errors.Is(err, io.EOF) {
			result = fmt.Errorf("shim: read request: %w", err)
		}
	}
	return result
}

// dispatch starts one request in its own goroutine (cancel is handled
// inline).
func (s *server) dispatch(ctx context.Context, req *Request) {
	if req.Op == OpCancel {
		s.mu.Lock()
		if cancel, ok := s.inflight[req.Target]; ok {
			cancel()
		}
		s.mu.Unlock()
		return
	}
	rctx, cancel := context.WithCancel(ctx)
	s.mu.Lock()
	s.inflight[req.ID] = cancel
	s.mu.Unlock()
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		resp := s.handle(rctx, req)
		resp.ID = req.ID
		s.mu.Lock()
		delete(s.inflight, req.ID)
		s.mu.Unlock()
		cancel()
		if err := s.send(resp); err != nil {
			// The stream is broken; the read loop will see it end.
			return
		}
	}()
}

func (s *server) handle(ctx context.Context, req *Request) *Response {
	resp := &Response{}
	var err error
	switch req.Op {
	case OpPing:
	case OpExec:
		var res sandbox.ExecResult
		if res, err = s.runExec(ctx, execRequestOf(req), req.Env); err == nil {
			resp.Exec = wireOutcome(res)
		}
	case OpRead:
		resp.Data, err = s.readFile(req.Path)
	case OpWrite:
		err = s.writeFile(req.Path, req.Data, req.Mode)
	case OpRemove:
		err = s.remove(req.Path)
	case OpStat:
		var fi sandbox.FileInfo
		if fi, err = s.stat(req.Path); err == nil {
			info := wireInfo(fi)
			resp.Info = &info
		}
	case OpList:
		var list []sandbox.FileInfo
		if list, err = s.list(req.Path); err == nil {
			resp.Infos = wireInfos(list)
		}
	case OpGlob:
		resp.Paths, err = s.glob(ctx, req.Pattern, req.Path)
	case OpGrep:
		var ms []sandbox.GrepMatch
		if ms, err = s.grep(ctx, grepRequestOf(req)); err == nil {
			resp.Matches = wireMatches(ms)
		}
	case OpUsage:
		resp.Bytes, err = s.usage(ctx)
	case OpWorkspace:
		resp.WS, err = s.workspace(ctx, req.WS)
	default:
		err = fmt.Errorf("unknown op %q: %w", req.Op, errInvalidReq)
	}
	if err != nil {
		return &Response{Error: wireError(err)}
	}
	return resp
}

// send writes one response; one too large to send becomes an error
// response, so the caller is not left waiting.
func (s *server) send(resp *Response) error {
	frame, err := encodeFrame(resp)
	if err != nil {
		frame, err = encodeFrame(&Response{ID: resp.ID, Error: &WireError{Kind: KindInvalid, Message: err.Error()}})
		if err != nil {
			return err
		}
	}
	s.wmu.Lock()
	defer s.wmu.Unlock()
	_, err = s.w.Write(frame)
	return err
}
