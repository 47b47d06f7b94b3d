package egress

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"
)

// Header is the response header that marks the proxy's own answers; its
// value is the kind: "denied", "dial-failed", "bad-request", "busy".
const Header = "X-Wrench-Egress"

// answer is a response of the proxy's own. reason goes on the status line
// too (after the standard text), because several clients show only that
// line of a refused CONNECT.
type answer struct {
	status int
	kind   string
	reason string // one line
	text   string // the body
}

// reply writes a and tells the client the connection closes.
func (cc *clientConn) reply(a answer) {
	status := http.StatusText(a.status)
	if a.reason != "" {
		status += ": " + strings.NewReplacer("\r", " ", "\n", " ").Replace(a.reason)
	}
	cc.c.SetWriteDeadline(time.Now().Add(cc.s.cfg.DialTimeout))
	fmt.Fprintf(cc.w, "HTTP/1.1 %03d %s\r\nContent-Type: text/plain; charset=utf-8\r\n%s: %s\r\nConnection: close\r\nContent-Length: %d\r\n\r\n%s",
		a.status, status, Header, a.kind, len(a.text), a.text)
	cc.w.Flush()
}

// denied explains a refused host in plain words: the host, the phase, who
// decides, and what this phase may reach.
func (s *Session) denied(host, why string) answer {
	allow := "is empty"
	b := s.current()
	if len(b.allow) > 0 {
		allow = "is: " + strings.Join(b.allow, ", ")
		if len(allow) > 1000 {
			allow = allow[:1000] + "…"
		}
	}
	text := fmt.Sprintf("wrench egress: denied: %s may not be reached in the %s phase of task %s: %s.\n"+
		"The sandbox has no network of its own; every connection goes through this proxy, and the server "+
		"policy's egress allowlist decides which hosts each phase may reach (egress.setup and egress.agent in the "+
		"policy; a repository's .wrench.yaml may ask for more within egress.allow). Network access in the agent "+
		"phase is off by default. This phase's allowlist %s.\n", host, s.cfg.Phase, b.taskID, why, allow)
	return answer{status: http.StatusForbidden, kind: "denied", text: text,
		reason: fmt.Sprintf("wrench egress policy denies %s in the %s phase", host, s.cfg.Phase)}
}

// dialFailed explains a host that could not be reached.
func dialFailed(host string, err error) answer {
	why := dialReason(err)
	return answer{status: http.StatusBadGateway, kind: "dial-failed", reason: "cannot reach " + host + ": " + why,
		text: fmt.Sprintf("wrench egress: %s is allowed but could not be reached: %s.\n", host, why)}
}

// dialReason is the readable part of a dial error.
func dialReason(err error) string {
	var dnsErr *net.DNSError
	var opErr *net.OpError
	switch {
	case errors.As(err, &dnsErr):
		if dnsErr.IsNotFound {
			return "no such host"
		}
		return "name lookup failed: " + dnsErr.Err
	case errors.As(err, &opErr) && opErr.Timeout():
		return "timed out"
	case errors.As(err, &opErr):
		return opErr.Err.Error()
	}
	return err.Error()
}

// refuseBusy answers a client past the session's connection cap.
func refuseBusy(c net.Conn, limit int) {
	c.SetDeadline(time.Now().Add(5 * time.Second))
	// Read the request head first, so the answer is not lost to a reset.
	http.ReadRequest(bufio.NewReader(io.LimitReader(c, DefaultMaxHeaderBytes)))
	text := fmt.Sprintf("wrench egress: this sandbox already has %d connections open through the proxy, the most it may; retry when one ends.\n", limit)
	fmt.Fprintf(c, "HTTP/1.1 503 Service Unavailable: too many egress connections\r\nContent-Type: text/plain; charset=utf-8\r\n%s: busy\r\nConnection: close\r\nContent-Length: %d\r\n\r\n%s", Header, len(text), text)
}
