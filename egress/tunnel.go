package egress

import (
	"errors"
	"io"
	"net"
	"net/http"
	"syscall"
	"time"
)

// tunnel serves CONNECT: the allowlist, the dial, "200", then bytes both
// ways until both sides are done, a cap or the idle rule cuts it, or the
// session closes.
func (cc *clientConn) tunnel(req *http.Request) {
	f := cc.s.newFlow()
	rec := Record{Method: http.MethodConnect, Start: f.begin}
	host, err := target(req.RequestURI, "")
	if err != nil {
		cc.reply(answer{status: http.StatusBadRequest, kind: "bad-request",
			text: "wrench egress: CONNECT needs host:port: " + err.Error() + "\n"})
		return
	}
	rec.Host = host
	up, ok := cc.open(f, &rec)
	if !ok {
		return
	}
	defer cc.s.untrack(up)
	cc.r.flow, cc.fw.flow = f, f
	_, err = io.WriteString(cc.w, "HTTP/1.1 200 Connection established\r\n\r\n")
	if err == nil {
		err = cc.w.Flush()
	}
	if err == nil {
		rec.Status = http.StatusOK
		err = cc.splice(f, &flowConn{Conn: up, idle: cc.s.cfg.IdleTimeout, flow: f})
	}
	rec.BytesUp, rec.BytesDown = f.up.Load(), f.down.Load()
	rec.Duration = time.Since(f.begin)
	if err = describe(cc.s, err); err != nil {
		rec.Err = err.Error()
	}
	cc.s.audit(rec)
}

// splice copies both ways; a side's end is passed on as a half-close, and
// any failure closes both so the other direction ends too. It returns the
// first failure.
func (cc *clientConn) splice(f *flow, up *flowConn) error {
	errc := make(chan error, 1)
	go func() { // awaited below
		err := f.pump(up, cc.br, &f.up) // cc.br: bytes the client sent after the CONNECT head
		if err == nil {
			closeWrite(up.Conn)
		} else {
			up.Close()
			cc.c.Close()
		}
		errc <- err
	}()
	err := f.pump(cc.fw, up, &f.down)
	if err == nil {
		closeWrite(cc.c)
	} else {
		up.Close()
		cc.c.Close()
	}
	return first(err, <-errc)
}

// first returns the cause among a connection's two ending errors: one
// that is not the consequence of the other's cut, else the first set.
func first(a, b error) error {
	if a == nil || errors.Is(a, net.ErrClosed) && b != nil {
		return b
	}
	return a
}

// closeWrite half-closes c when it can.
func closeWrite(c net.Conn) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		cw.CloseWrite()
	}
}

// describe turns the error that ended a connection into the record's
// words.
func describe(s *Session, err error) error {
	if err == nil {
		return nil
	}
	var ce *capError
	switch {
	case errors.As(err, &ce):
		return ce
	case errors.Is(err, syscall.EPIPE), errors.Is(err, syscall.ECONNRESET):
		return nil // a side hung up: how connections end
	case s.ctx.Err() != nil:
		return errors.New("the egress session closed")
	case isTimeout(err):
		return errors.New("idle for " + s.cfg.IdleTimeout.String())
	}
	return err
}

// open checks the session's byte budget and the allowlist for rec.Host and
// dials it. On refusal or failure it audits rec, answers the client and
// returns false.
func (cc *clientConn) open(f *flow, rec *Record) (net.Conn, bool) {
	s := cc.s
	fail := func(a answer, allowed bool, reason string, err error) (net.Conn, bool) {
		rec.Allowed, rec.Reason, rec.Status = allowed, reason, a.status
		if err != nil {
			rec.Err = err.Error()
		}
		rec.Duration = time.Since(f.begin)
		// Audit before answering: the client may act on the answer at
		// once (a warm sandbox's session is assigned to a task), and the
		// refusal belongs to whoever held the session when it was made.
		s.audit(*rec)
		cc.reply(a)
		return nil, false
	}
	if used := s.used.Load(); used >= s.cfg.MaxSessionBytes {
		ce := &capError{"session", s.cfg.MaxSessionBytes}
		return fail(s.denied(rec.Host, ce.Error()), false, ce.Error(), nil)
	}
	rule := s.rule(rec.Host)
	if rule == "" {
		why := "not on the " + s.cfg.Phase + " phase's egress allowlist"
		return fail(s.denied(rec.Host, why), false, why, nil)
	}
	rec.Rule, rec.Reason = rule, "allowed by "+quote(rule)
	up, err := s.dial(s.ctx, rec.Host, rule)
	var ie *internalError
	switch {
	case errors.As(err, &ie):
		rec.Rule = ""
		return fail(s.denied(rec.Host, ie.Error()), false, ie.Error(), nil)
	case err != nil:
		return fail(dialFailed(rec.Host, err), true, rec.Reason, errors.New("dial: "+dialReason(err)))
	}
	rec.Allowed = true
	return up, true
}

func quote(s string) string { return `"` + s + `"` }
