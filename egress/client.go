package egress

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"time"
)

// ioBufSize is the size of every read and write buffer on a connection.
const ioBufSize = 32 << 10

// clientConn is one connection from the sandbox: a sequence of requests,
// each a forwarded exchange, ending with a tunnel or a refusal.
type clientConn struct {
	s  *Session
	c  net.Conn
	r  *connReader
	br *bufio.Reader
	w  *bufio.Writer // on a flowConn, so writes share the idle rule
	fw *flowConn

	up *upstream // the host connection kept alive for the next request
}

func newClientConn(s *Session, c net.Conn) *clientConn {
	r := &connReader{c: c, idle: s.cfg.IdleTimeout}
	fw := &flowConn{Conn: c, idle: s.cfg.IdleTimeout}
	return &clientConn{s: s, c: c, r: r, br: bufio.NewReaderSize(r, ioBufSize), fw: fw, w: bufio.NewWriterSize(fw, ioBufSize)}
}

// serve reads requests until the client is done, a request ends the
// connection (a tunnel, a refusal, "Connection: close"), or the session
// closes.
func (cc *clientConn) serve() {
	defer cc.dropUpstream()
	for {
		cc.r.remain = int64(cc.s.cfg.MaxHeaderBytes) + ioBufSize
		req, err := http.ReadRequest(cc.br)
		cc.r.remain = -1
		if err != nil {
			cc.readFailed(err)
			return
		}
		if !cc.handle(req) {
			return
		}
	}
}

// readFailed answers a request that could not be read, unless the client
// simply left (or idled out between requests).
func (cc *clientConn) readFailed(err error) {
	var ne net.Error
	switch {
	case errors.Is(err, io.EOF), errors.Is(err, net.ErrClosed), errors.As(err, &ne) && ne.Timeout():
	case errors.Is(err, errHeaderTooLarge):
		cc.reply(answer{status: http.StatusRequestHeaderFieldsTooLarge, kind: "bad-request",
			text: "wrench egress: the request head is larger than the proxy accepts.\n"})
	default:
		cc.reply(answer{status: http.StatusBadRequest, kind: "bad-request",
			text: "wrench egress: cannot read the request: " + err.Error() + "\n"})
	}
}

// handle serves one request and reports whether the connection may carry
// another.
func (cc *clientConn) handle(req *http.Request) bool {
	switch {
	case req.Method == http.MethodConnect:
		cc.tunnel(req)
		return false
	case req.URL.IsAbs() && strings.EqualFold(req.URL.Scheme, "http"):
		return cc.forward(req)
	case req.URL.IsAbs():
		cc.reply(answer{status: http.StatusBadRequest, kind: "bad-request",
			text: "wrench egress: only http:// URLs are forwarded as requests; for " + req.URL.Scheme + " use CONNECT (set HTTPS_PROXY to this proxy).\n"})
	default:
		cc.reply(answer{status: http.StatusBadRequest, kind: "bad-request",
			text: "wrench egress: this is an HTTP forward proxy: send requests with absolute URLs (set HTTP_PROXY to it) or CONNECT host:port (HTTPS_PROXY).\n"})
	}
	return false
}

// dropUpstream closes the kept-alive host connection.
func (cc *clientConn) dropUpstream() {
	if cc.up != nil {
		cc.s.untrack(cc.up.c)
		cc.up = nil
	}
}

var errHeaderTooLarge = errors.New("request head too large")

// connReader reads the client connection under the idle rule: a read
// waits at most IdleTimeout, and longer only while the current exchange's
// flow moves bytes the other way. While remain >= 0 (a request head is
// being read) reads are limited to that many bytes.
type connReader struct {
	c      net.Conn
	idle   time.Duration
	remain int64
	flow   *flow // the current exchange, nil between requests
}

func (r *connReader) Read(p []byte) (int, error) {
	if r.remain == 0 {
		return 0, errHeaderTooLarge
	}
	if r.remain > 0 && int64(len(p)) > r.remain {
		p = p[:r.remain]
	}
	for {
		r.c.SetReadDeadline(time.Now().Add(r.idle))
		n, err := r.c.Read(p)
		if r.remain > 0 {
			r.remain -= int64(n)
		}
		if n > 0 && r.flow != nil {
			r.flow.touch()
		}
		if n == 0 && r.flow.stillActive(err) {
			continue
		}
		return n, err
	}
}

// flowConn is a connection whose reads and writes follow the idle rule of
// its flow (none set: a plain IdleTimeout per call).
type flowConn struct {
	net.Conn
	idle time.Duration
	flow *flow
}

func (c *flowConn) Read(p []byte) (int, error) {
	for {
		c.SetReadDeadline(time.Now().Add(c.idle))
		n, err := c.Conn.Read(p)
		if n > 0 {
			c.flow.touch()
		}
		if n == 0 && c.flow.stillActive(err) {
			continue
		}
		return n, err
	}
}

func (c *flowConn) Write(p []byte) (int, error) {
	done := 0
	for {
		c.SetWriteDeadline(time.Now().Add(c.idle))
		n, err := c.Conn.Write(p[done:])
		done += n
		if n > 0 {
			c.flow.touch()
		}
		if err != nil && done < len(p) && c.flow.stillActive(err) {
			continue
		}
		return done, err
	}
}

// isTimeout reports a deadline error.
func isTimeout(err error) bool { return errors.Is(err, os.ErrDeadlineExceeded) }
