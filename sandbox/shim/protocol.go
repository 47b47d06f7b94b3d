package shim

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"
)

// ProtocolVersion is sent in the hello frame; a client refuses a server
// speaking another version.
const ProtocolVersion = 1

// MaxFrame is the largest frame either side accepts (256 MiB).
const MaxFrame = 256 << 20

// The operations a [Request] may name.
const (
	OpExec   = "exec"
	OpRead   = "read"
	OpWrite  = "write"
	OpRemove = "remove"
	OpStat   = "stat"
	OpList   = "list"
	OpGlob   = "glob"
	OpGrep   = "grep"
	OpUsage  = "usage"  // bytes used under the workspace
	OpPing   = "ping"   // liveness check
	OpCancel = "cancel" // cancels request Target; no response
	// OpWorkspace runs a workspace operation (Request.WS) on the git
	// workspace that lives in the sandbox (see workspace.go).
	OpWorkspace = "ws"
)

// Request is one frame from the client.
type Request struct {
	ID uint64 `json:"id"`
	Op string `json:"op"`
	// Target is the request to cancel (OpCancel).
	Target uint64 `json:"target,omitempty"`

	// Path is a workspace path (file operations, glob's dir, grep's root).
	Path string `json:"path,omitempty"`
	// Data is a file's new contents (OpWrite).
	Data []byte `json:"data,omitempty"`
	// Mode is the permission bits for OpWrite; 0 keeps an existing file's
	// mode and uses 0644 for a new one.
	Mode uint32 `json:"mode,omitempty"`

	// WS is the workspace operation of an OpWorkspace request.
	WS *WSRequest `json:"ws,omitempty"`
	// User runs an exec as "uid:gid" instead of the helper's own user
	// (only a helper running as root can).
	User string `json:"user,omitempty"`

	// Command, Dir, TimeoutMS, MaxOutput, Stdin and Env describe an exec.
	Command   string            `json:"command,omitempty"`
	Dir       string            `json:"dir,omitempty"`
	TimeoutMS int64             `json:"timeout_ms,omitempty"`
	MaxOutput int               `json:"max_output,omitempty"`
	Stdin     []byte            `json:"stdin,omitempty"`
	Env       map[string]string `json:"env,omitempty"`

	// Pattern is a glob (OpGlob) or an RE2 regular expression (OpGrep).
	Pattern string `json:"pattern,omitempty"`
	// Include filters grep by file name glob (e.g. "*.go" or "*.{go,md}").
	Include    string `json:"include,omitempty"`
	MaxMatches int    `json:"max_matches,omitempty"`
}

// Response is one frame from the server.
type Response struct {
	ID    uint64     `json:"id"`
	Error *WireError `json:"error,omitempty"`

	Hello   *Hello       `json:"hello,omitempty"`
	Exec    *ExecOutcome `json:"exec,omitempty"`
	Data    []byte       `json:"data,omitempty"`
	Info    *Info        `json:"info,omitempty"`
	Infos   []Info       `json:"infos,omitempty"`
	Paths   []string     `json:"paths,omitempty"`
	Matches []Match      `json:"matches,omitempty"`
	Bytes   int64        `json:"bytes,omitempty"`
	WS      *WSResponse  `json:"ws,omitempty"`
}

// Hello is the server's first frame.
type Hello struct {
	Version int    `json:"version"`
	PID     int    `json:"pid"`
	UID     int    `json:"uid"`
	Shell   string `json:"shell"`
	WorkDir string `json:"workdir"`
}

// ExecOutcome is what a command did.
type ExecOutcome struct {
	ExitCode   int    `json:"exit_code"`
	Output     []byte `json:"output"`
	Dropped    int64  `json:"dropped,omitempty"`
	TimedOut   bool   `json:"timed_out,omitempty"`
	DurationNS int64  `json:"duration_ns"`
}

// Info describes one file.
type Info struct {
	Path    string    `json:"path"`
	Size    int64     `json:"size"`
	Mode    uint32    `json:"mode"` // fs.FileMode bits
	IsDir   bool      `json:"is_dir,omitempty"`
	ModTime time.Time `json:"mod_time"`
}

// Match is one grep hit. Text is the line (clipped when very long) as
// UTF-8: invalid bytes arrive as U+FFFD.
type Match struct {
	Path string `json:"path"`
	Line int    `json:"line"`
	Text string `json:"text"`
}

// Error kinds carried by [WireError]; [WireError.Unwrap] maps them back to
// the io/fs and sandbox sentinels so callers can use errors.Is(err,
// fs.ErrNotExist) or errors.Is(err, sandbox.ErrEscape).
const (
	KindNotExist   = "not_exist"
	KindExist      = "exist"
	KindPermission = "permission"
	KindInvalid    = "invalid"
	KindEscape     = "escape" // path resolves outside the workspace
	KindIsDir      = "is_dir"
	KindNotDir     = "not_dir"
	KindCanceled   = "canceled"
	KindTooLarge   = "too_large"
	KindOther      = "other"
)

// WireError is an error reported by the server for one request.
type WireError struct {
	Kind    string `json:"kind"`
	Message string `json:"message"`
}

func (e *WireError) Error() string { return e.Message }

var errCanceled = errors.New("request canceled")

// ErrTooLarge is matched by errors for a request or response that would
// not fit in one frame; nothing was sent and the stream is still usable.
var ErrTooLarge = errors.New("message too large for the shim protocol")

// encodeFrame encodes v as one frame (header and body).
func encodeFrame(v any) ([]byte, error) {
	body, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("encode frame: %w", err)
	}
	if len(body) > MaxFrame {
		return nil, fmt.Errorf("%w: %d bytes encoded, limit %d", ErrTooLarge, len(body), MaxFrame)
	}
	buf := make([]byte, 4+len(body))
	binary.BigEndian.PutUint32(buf, uint32(len(body)))
	copy(buf[4:], body)
	return buf, nil
}

// readFrame reads one frame into v. It returns io.EOF only when the stream
// ended cleanly between frames.
func readFrame(r *bufio.Reader, v any) error {
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) {
			return fmt.Errorf("read frame header: %w", err)
		}
		return err
	}
	n := binary.BigEndian.Uint32(hdr[:])
	if n > MaxFrame {
		return fmt.Errorf("frame of %d bytes exceeds the %d byte limit", n, MaxFrame)
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(r, body); err != nil {
		return fmt.Errorf("read frame body: %w", err)
	}
	if err := json.Unmarshal(body, v); err != nil {
		return fmt.Errorf("decode frame: %w", err)
	}
	return nil
}
