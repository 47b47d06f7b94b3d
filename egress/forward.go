package egress

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// writerGrace is how long a forwarded request's body may still be being
// written after the host's whole response was relayed; past it the host
// connection is dropped (the host answered without reading the body).
const writerGrace = time.Second

// upstream is a host connection kept alive between a client's requests.
type upstream struct {
	host, rule string
	c          *flowConn
	br         *bufio.Reader
	bw         *bufio.Writer
}

// forward relays one absolute-form HTTP request and its response and
// reports whether the client connection may carry another.
func (cc *clientConn) forward(req *http.Request) bool {
	f := cc.s.newFlow()
	rec := Record{Method: req.Method, Start: f.begin}
	host, err := target(req.URL.Host, "80")
	if err != nil {
		cc.reply(answer{status: http.StatusBadRequest, kind: "bad-request", text: "wrench egress: " + err.Error() + "\n"})
		return false
	}
	rec.Host = host
	clientClose := req.Close
	expect := prepareRequest(req, f)
	cc.r.flow, cc.fw.flow = f, f
	defer func() { cc.r.flow, cc.fw.flow = nil, nil }()
	keep, audited, err := cc.roundTrip(req, expect, f, &rec)
	if audited {
		return false
	}
	rec.BytesUp, rec.BytesDown = f.up.Load(), f.down.Load()
	rec.Duration = time.Since(f.begin)
	if err = describe(cc.s, err); err != nil {
		rec.Err = err.Error()
	}
	cc.s.audit(rec)
	return keep && !clientClose
}

// prepareRequest makes req fit to send to the host: hop-by-hop headers
// (Proxy-Authorization among them) removed, nothing added, the body
// metered. It reports whether the client expects a 100 Continue.
func prepareRequest(req *http.Request, f *flow) (expect bool) {
	expect = strings.EqualFold(req.Header.Get("Expect"), "100-continue")
	req.Header.Del("Expect")
	removeHop(req.Header)
	if _, ok := req.Header["User-Agent"]; !ok {
		req.Header["User-Agent"] = []string{""} // Request.Write then adds none
	}
	req.Close = false // the host connection's keep-alive is the proxy's
	if req.Body != nil && req.Body != http.NoBody {
		req.Body = &meteredBody{ReadCloser: req.Body, f: f, count: &f.up} // flush: set per host connection
	} else {
		req.Body, expect = http.NoBody, false
	}
	return expect
}

// roundTrip sends req on a kept-alive or new host connection and relays
// the response. A request without a body that fails on a reused
// connection before any answer (the host closed it meanwhile) is sent
// once more on a new one. audited is true when the proxy answered and
// audited the request itself (a denial, a failed dial).
func (cc *clientConn) roundTrip(req *http.Request, expect bool, f *flow, rec *Record) (keep, audited bool, err error) {
	for attempt := 0; ; attempt++ {
		u, reused, ok := cc.upstreamFor(f, rec)
		if !ok {
			return false, true, nil
		}
		if expect {
			io.WriteString(cc.w, "HTTP/1.1 100 Continue\r\n\r\n")
			cc.w.Flush()
			expect = false
		}
		if mb, ok := req.Body.(*meteredBody); ok {
			mb.flush = u.bw
		}
		werrc := make(chan error, 1)
		go func() { // awaited by finishWrite on every path
			err := req.Write(streamWriter{bw: u.bw, w: u.c, s: cc.s})
			if err == nil {
				err = u.bw.Flush()
			}
			werrc <- err
		}()
		resp, err := cc.readResponse(u, req)
		if err != nil {
			cc.dropUpstream()
			<-werrc
			if reused && attempt == 0 && req.Body == http.NoBody && !isTimeout(err) && cc.s.ctx.Err() == nil {
				continue
			}
			a := dialFailed(rec.Host, err)
			a.reason, a.text = "no answer from "+rec.Host, fmt.Sprintf("wrench egress: %s did not answer: %s.\n", rec.Host, dialReason(err))
			cc.reply(a)
			rec.Status = a.status
			return false, false, err
		}
		return cc.relay(u, req, resp, f, rec, werrc)
	}
}

// upstreamFor returns the kept-alive connection to rec.Host, or drops it
// and opens one (the budget and allowlist checked, rec filled).
func (cc *clientConn) upstreamFor(f *flow, rec *Record) (u *upstream, reused, ok bool) {
	if u := cc.up; u != nil && u.host == rec.Host && cc.s.used.Load() < cc.s.cfg.MaxSessionBytes {
		rec.Allowed, rec.Rule, rec.Reason = true, u.rule, "allowed by "+quote(u.rule)
		u.c.flow = f
		return u, true, true
	}
	cc.dropUpstream()
	c, ok := cc.open(f, rec)
	if !ok {
		return nil, false, false
	}
	fc := &flowConn{Conn: c, idle: cc.s.cfg.IdleTimeout, flow: f}
	cc.up = &upstream{host: rec.Host, rule: rec.Rule, c: fc, br: bufio.NewReaderSize(fc, ioBufSize), bw: bufio.NewWriterSize(fc, ioBufSize)}
	return cc.up, false, true
}

// readResponse reads the host's response head, passing interim (1xx)
// responses on to the client.
func (cc *clientConn) readResponse(u *upstream, req *http.Request) (*http.Response, error) {
	for {
		resp, err := http.ReadResponse(u.br, req)
		if err != nil {
			return nil, err
		}
		switch {
		case resp.StatusCode == http.StatusSwitchingProtocols:
			return nil, errors.New("the host switched protocols, which the proxy does not relay (use CONNECT)")
		case resp.StatusCode >= 100 && resp.StatusCode < 200:
			fmt.Fprintf(cc.w, "HTTP/1.1 %s\r\n", resp.Status)
			resp.Header.Write(cc.w)
			io.WriteString(cc.w, "\r\n")
			if err := cc.w.Flush(); err != nil {
				return nil, err
			}
			continue
		}
		return resp, nil
	}
}

// relay writes the host's response to the client and settles both
// connections: each is kept alive only when its message ended cleanly.
func (cc *clientConn) relay(u *upstream, req *http.Request, resp *http.Response, f *flow, rec *Record, werrc chan error) (keep, audited bool, err error) {
	rec.Status = resp.StatusCode
	removeHop(resp.Header)
	hostClose := resp.Close
	resp.Proto, resp.ProtoMajor, resp.ProtoMinor = "HTTP/1.1", 1, 1
	resp.Close = false
	// Response.Write ends a body of unknown length without chunking by
	// closing the connection.
	clientClose := resp.ContentLength == -1 && !isChunked(resp.TransferEncoding)
	resp.Body = &meteredBody{ReadCloser: resp.Body, f: f, count: &f.down, flush: cc.w}
	err = resp.Write(streamWriter{bw: cc.w, w: cc.fw, s: cc.s})
	if ferr := cc.w.Flush(); err == nil { // what was granted, even when cut
		err = ferr
	}
	resp.Body.Close()
	werr := cc.finishWrite(werrc)
	if err != nil || werr != nil || hostClose {
		cc.dropUpstream()
	}
	if err == nil && werr != nil {
		err = fmt.Errorf("sending the request body: %w", werr)
	}
	return err == nil && !clientClose, false, err
}

// finishWrite waits for the request writer; one still writing a grace
// after the response is over is stopped by closing both connections.
func (cc *clientConn) finishWrite(werrc chan error) error {
	t := time.NewTimer(writerGrace)
	defer t.Stop()
	select {
	case err := <-werrc:
		return err
	case <-t.C:
		// The writer is blocked on the host or on the client's body:
		// neither connection can carry another message.
		cc.dropUpstream()
		cc.c.Close()
		<-werrc
		return errors.New("the host answered before reading the whole request body")
	}
}

func isChunked(te []string) bool { return len(te) > 0 && te[0] == "chunked" }

// hopHeaders are the headers of one connection, never forwarded
// (RFC 9110, section 7.6.1), plus the proxy's own.
var hopHeaders = []string{"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate", "Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade"}

// removeHop deletes hop-by-hop headers, and those Connection names.
func removeHop(h http.Header) {
	for _, v := range h.Values("Connection") {
		for _, name := range strings.Split(v, ",") {
			if name = strings.TrimSpace(name); name != "" {
				h.Del(name)
			}
		}
	}
	for _, k := range hopHeaders {
		h.Del(k)
	}
}
