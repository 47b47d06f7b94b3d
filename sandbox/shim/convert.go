package shim

import (
	"errors"
	"fmt"
	"io/fs"
	"time"

	"github.com/wrenchworks/wrench/sandbox"
)

// The one place where the sandbox vocabulary (package sandbox) and the wire
// structs meet: the client turns sandbox requests into frames and frames
// into sandbox results, the server the other way round.

// execRequestFrame is the frame of an exec, with env added to the server's
// base environment.
func execRequestFrame(req sandbox.ExecRequest, env map[string]string) *Request {
	r := &Request{
		Op:        OpExec,
		Command:   req.Command,
		Dir:       req.Dir,
		TimeoutMS: req.Timeout.Milliseconds(),
		MaxOutput: req.MaxOutput,
		Stdin:     req.Stdin,
		Env:       env,
		User:      req.User,
	}
	if req.Timeout > 0 && r.TimeoutMS == 0 {
		r.TimeoutMS = 1
	}
	return r
}

// execRequestOf is what an exec frame asks for.
func execRequestOf(r *Request) sandbox.ExecRequest {
	return sandbox.ExecRequest{
		Command:   r.Command,
		Dir:       r.Dir,
		Timeout:   time.Duration(r.TimeoutMS) * time.Millisecond,
		MaxOutput: r.MaxOutput,
		Stdin:     r.Stdin,
		User:      r.User,
	}
}

func wireOutcome(res sandbox.ExecResult) *ExecOutcome {
	return &ExecOutcome{
		ExitCode:   res.ExitCode,
		Output:     res.Output,
		Dropped:    res.Dropped,
		TimedOut:   res.TimedOut,
		DurationNS: int64(res.Duration),
	}
}

func execResultOf(o *ExecOutcome) sandbox.ExecResult {
	out := o.Output
	if out == nil {
		out = []byte{}
	}
	return sandbox.ExecResult{
		ExitCode: o.ExitCode,
		Output:   out,
		Dropped:  o.Dropped,
		TimedOut: o.TimedOut,
		Duration: time.Duration(o.DurationNS),
	}
}

func wireInfo(fi sandbox.FileInfo) Info {
	return Info{Path: fi.Path, Size: fi.Size, Mode: uint32(fi.Mode), IsDir: fi.IsDir, ModTime: fi.ModTime}
}

func fileInfoOf(in Info) sandbox.FileInfo {
	return sandbox.FileInfo{Path: in.Path, Size: in.Size, Mode: fs.FileMode(in.Mode), IsDir: in.IsDir, ModTime: in.ModTime}
}

func wireInfos(list []sandbox.FileInfo) []Info {
	out := make([]Info, len(list))
	for i, fi := range list {
		out[i] = wireInfo(fi)
	}
	return out
}

func fileInfosOf(list []Info) []sandbox.FileInfo {
	out := make([]sandbox.FileInfo, len(list))
	for i, in := range list {
		out[i] = fileInfoOf(in)
	}
	return out
}

func grepRequestFrame(req sandbox.GrepRequest) *Request {
	return &Request{Op: OpGrep, Pattern: req.Pattern, Path: req.Path, Include: req.Include, MaxMatches: req.MaxMatches}
}

func grepRequestOf(r *Request) sandbox.GrepRequest {
	return sandbox.GrepRequest{Pattern: r.Pattern, Path: r.Path, Include: r.Include, MaxMatches: r.MaxMatches}
}

func wireMatches(ms []sandbox.GrepMatch) []Match {
	out := make([]Match, len(ms))
	for i, m := range ms {
		out[i] = Match(m)
	}
	return out
}

func grepMatchesOf(ms []Match) []sandbox.GrepMatch {
	out := make([]sandbox.GrepMatch, len(ms))
	for i, m := range ms {
		out[i] = sandbox.GrepMatch(m)
	}
	return out
}

// wireKinds pairs each error kind with the sentinel it stands for, most
// specific first: an error is sent as the first kind it matches.
var wireKinds = []struct {
	kind string
	err  error
}{
	{KindEscape, sandbox.ErrEscape},
	{KindIsDir, sandbox.ErrIsDir},
	{KindNotDir, sandbox.ErrNotDir},
	{KindNotExist, fs.ErrNotExist},
	{KindExist, fs.ErrExist},
	{KindPermission, fs.ErrPermission},
	{KindInvalid, fs.ErrInvalid},
	{KindCanceled, errCanceled},
	{KindTooLarge, ErrTooLarge},
}

// wireError classifies err for the wire.
func wireError(err error) *WireError {
	for _, k := range wireKinds {
		if errors.Is(err, k.err) {
			return &WireError{Kind: k.kind, Message: err.Error()}
		}
	}
	return &WireError{Kind: KindOther, Message: err.Error()}
}

// Unwrap maps the kind back to its sentinel (and the sentinels that one
// matches, such as fs.ErrPermission for an escape).
func (e *WireError) Unwrap() []error {
	if e.Kind == KindCanceled {
		return nil // a canceled request is the caller's ctx, reported as such
	}
	for _, k := range wireKinds {
		if k.kind == e.Kind {
			return []error{k.err}
		}
	}
	return nil
}

// emptyResponse is the error for a response that lacks what its op returns.
func emptyResponse(op string) error {
	return fmt.Errorf("%s: empty response", op)
}
