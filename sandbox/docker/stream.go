package docker

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"strings"
	"sync"

	"github.com/docker/docker/api/types"
)

// attachConn is the shim's stream over an attached container: writes go to
// the container's stdin, reads return its stdout with the engine's
// multiplexing headers removed; stderr goes to a small ring kept for error
// messages.
type attachConn struct {
	hj        types.HijackedResponse
	r         *bufio.Reader
	remaining uint32
	stderr    *tailBuffer
	closeOnce sync.Once
}

func newAttachConn(hj types.HijackedResponse, stderr *tailBuffer) *attachConn {
	return &attachConn{hj: hj, r: hj.Reader, stderr: stderr}
}

// Read demultiplexes the stream (8-byte headers: stream type, 3 zero
// bytes, big-endian payload size).
func (c *attachConn) Read(p []byte) (int, error) {
	for c.remaining == 0 {
		var hdr [8]byte
		if _, err := io.ReadFull(c.r, hdr[:]); err != nil {
			if err == io.ErrUnexpectedEOF {
				return 0, fmt.Errorf("attach stream: truncated header")
			}
			return 0, err
		}
		size := binary.BigEndian.Uint32(hdr[4:])
		switch hdr[0] {
		case 1: // stdout
			c.remaining = size
		case 0, 2: // stdin echo (never with a tty off) or stderr
			if _, err := io.CopyN(c.stderr, c.r, int64(size)); err != nil {
				return 0, fmt.Errorf("attach stream: %w", err)
			}
		default:
			return 0, fmt.Errorf("attach stream: unknown stream type %d", hdr[0])
		}
	}
	if uint32(len(p)) > c.remaining {
		p = p[:c.remaining]
	}
	n, err := c.r.Read(p)
	c.remaining -= uint32(n)
	if err == io.EOF && c.remaining > 0 {
		err = io.ErrUnexpectedEOF
	}
	return n, err
}

func (c *attachConn) Write(p []byte) (int, error) { return c.hj.Conn.Write(p) }

// Close closes the connection; with StdinOnce the engine then closes the
// shim's stdin and the shim exits.
func (c *attachConn) Close() error {
	c.closeOnce.Do(c.hj.Close)
	return nil
}

// tailBuffer keeps the first bytes written to it (where a Go runtime
// abort names its cause) and the last ones.
type tailBuffer struct {
	mu      sync.Mutex
	headMax int // bytes kept from the start
	max     int // bytes kept from the end
	head    []byte
	buf     []byte
	skipped bool
}

func (b *tailBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := len(p)
	if room := b.headMax - len(b.head); room > 0 {
		k := min(room, len(p))
		b.head = append(b.head, p[:k]...)
		p = p[k:]
	}
	b.buf = append(b.buf, p...)
	if over := len(b.buf) - b.max; over > 0 {
		b.buf = append(b.buf[:0], b.buf[over:]...)
		b.skipped = true
	}
	return n, nil
}

// String is the head and the tail, with "…" where bytes were dropped.
func (b *tailBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.skipped {
		return string(b.head) + "\n…\n" + string(b.buf)
	}
	return string(b.head) + string(b.buf)
}

// FirstLine is the first non-empty line written.
func (b *tailBuffer) FirstLine() string {
	s := strings.TrimSpace(b.String())
	line, _, _ := strings.Cut(s, "\n")
	return strings.TrimSpace(line)
}
