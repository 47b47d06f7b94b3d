package egress

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"sync/atomic"
	"time"
)

// flow is what one record measures: the bytes of one tunnel or one
// forwarded exchange, both ways, and when a byte last moved.
type flow struct {
	s        *Session
	begin    time.Time
	last     atomic.Int64 // unix nanoseconds of the last byte moved
	used     atomic.Int64 // both ways, for MaxConnBytes
	up, down atomic.Int64 // delivered bytes
}

func (s *Session) newFlow() *flow {
	f := &flow{s: s, begin: time.Now()}
	f.touch()
	return f
}

// touch notes that a byte moved. A nil flow ignores it.
func (f *flow) touch() {
	if f != nil {
		f.last.Store(time.Now().UnixNano())
	}
}

// stillActive reports whether err is a deadline that should be waited
// past: the other direction of the flow moved a byte within IdleTimeout.
func (f *flow) stillActive(err error) bool {
	if f == nil || err == nil || !isTimeout(err) {
		return false
	}
	return time.Since(time.Unix(0, f.last.Load())) < f.s.cfg.IdleTimeout
}

// capError is a byte cap reached.
type capError struct {
	what  string
	limit int64
}

func (e *capError) Error() string {
	return fmt.Sprintf("the egress byte cap per %s (%d bytes) was reached", e.what, e.limit)
}

// reserve asks to move n bytes; it grants fewer (and says why) when a cap
// would be passed.
func (f *flow) reserve(n int) (int, error) {
	granted, n64 := n, int64(n)
	var err error
	if over := f.used.Add(n64) - f.s.cfg.MaxConnBytes; over > 0 {
		granted = min(granted, int(max(n64-over, 0)))
		err = &capError{"connection", f.s.cfg.MaxConnBytes}
	}
	if over := f.s.used.Add(n64) - f.s.cfg.MaxSessionBytes; over > 0 {
		granted = min(granted, int(max(n64-over, 0)))
		err = &capError{"session", f.s.cfg.MaxSessionBytes}
	}
	return granted, err
}

// pump copies src to dst under the caps, counting delivered bytes in
// count. It returns nil when src ends. It reads into a small buffer until
// a read fills it, then into a bulk one, so an idle or chatty tunnel holds
// little memory and a download costs few syscalls.
func (f *flow) pump(dst io.Writer, src io.Reader, count *atomic.Int64) error {
	buf := make([]byte, ioBufSize)
	var bulk *[]byte
	defer func() {
		if bulk != nil {
			f.s.bulk.Put(bulk)
		}
	}()
	for {
		n, rerr := src.Read(buf)
		if n > 0 {
			ok, cerr := f.reserve(n)
			w, werr := dst.Write(buf[:ok])
			count.Add(int64(w))
			if werr != nil {
				return werr
			}
			if cerr != nil {
				return cerr
			}
		}
		if errors.Is(rerr, io.EOF) {
			return nil
		}
		if rerr != nil {
			return rerr
		}
		if n == len(buf) && bulk == nil {
			bulk = f.s.bulkBuf()
			buf = *bulk
		}
	}
}

// meteredBody is a message body read under the caps, counting into count.
// Before each read it flushes the buffer the body is being written to, so
// what arrived is passed on before waiting for more (bodies stream). That
// buffer must be written through a [streamWriter], never filled by its own
// ReadFrom, which reads into the buffer a flush rearranges.
type meteredBody struct {
	io.ReadCloser
	f     *flow
	count *atomic.Int64
	flush *bufio.Writer
	err   error // the cap, once reached
}

func (b *meteredBody) Read(p []byte) (int, error) {
	if b.err != nil {
		return 0, b.err
	}
	if b.flush.Buffered() > 0 {
		if err := b.flush.Flush(); err != nil {
			return 0, err
		}
	}
	n, err := b.ReadCloser.Read(p)
	if n > 0 {
		var cerr error
		if n, cerr = b.f.reserve(n); cerr != nil {
			b.err, err = cerr, cerr
		}
		b.count.Add(int64(n))
	}
	return n, err
}

// streamWriter writes to a bufio.Writer but hides its ReadFrom, so copies
// into it go through their own buffer (see meteredBody). It is a
// ByteWriter, so Request.Write adds no buffer of its own. Its own ReadFrom
// (a body of known length) flushes bw and copies in bulk to w, the
// connection under bw: one read and one write per bulk buffer.
type streamWriter struct {
	bw *bufio.Writer
	w  io.Writer
	s  *Session
}

func (w streamWriter) Write(p []byte) (int, error)       { return w.bw.Write(p) }
func (w streamWriter) WriteByte(c byte) error            { return w.bw.WriteByte(c) }
func (w streamWriter) WriteString(s string) (int, error) { return w.bw.WriteString(s) }

func (w streamWriter) ReadFrom(r io.Reader) (int64, error) {
	if err := w.bw.Flush(); err != nil {
		return 0, err
	}
	buf := w.s.bulkBuf()
	defer w.s.bulk.Put(buf)
	return io.CopyBuffer(struct{ io.Writer }{w.w}, struct{ io.Reader }{r}, *buf)
}
