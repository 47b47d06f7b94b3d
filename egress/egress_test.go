package egress_test

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/wrenchworks/wrench/egress"
)

func TestConnectAllowedToTLSServer(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "hello over %s, auth %q", r.Proto, r.Header.Get("Proxy-Authorization"))
	}))
	defer srv.Close()
	host := srv.Listener.Addr().String()
	s, a := open(t, egress.SessionConfig{Allow: []string{"pypi.org", "127.0.0.1"}})
	pool := x509.NewCertPool()
	pool.AddCert(srv.Certificate())
	c, _ := client(s, &tls.Config{RootCAs: pool})
	resp, err := c.Get("https://" + host + "/x")
	if err != nil {
		t.Fatalf("GET through the tunnel: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(body) != `hello over HTTP/1.1, auth ""` {
		t.Errorf("body = %q", body)
	}
	c.CloseIdleConnections() // ends the tunnel
	r := a.wait(t, 1)[0]
	if !r.Allowed || r.Host != host || r.Rule != "127.0.0.1" || r.Method != "CONNECT" || r.Status != 200 ||
		r.Phase != egress.PhaseSetup || r.TaskID != "t-1" || r.Err != "" || r.BytesUp == 0 || r.BytesDown == 0 {
		t.Errorf("record = %+v", r)
	}
}

func TestConnectCountsExactBytesAndPassesHalfClose(t *testing.T) {
	host := tcpServer(t, echo)
	s, a := open(t, egress.SessionConfig{Allow: []string{"127.0.0.1"}})
	c := dial(t, s)
	resp, br := connect(t, c, host)
	if resp.StatusCode != 200 {
		t.Fatalf("CONNECT: %s", resp.Status)
	}
	payload := bytes.Repeat([]byte("egress!"), 150_000) // 1,050,000 bytes
	go func() {
		c.Write(payload)
		c.(*net.UnixConn).CloseWrite() // the echo ends only when this reaches it
	}()
	got, err := io.ReadAll(br)
	if err != nil || !bytes.Equal(got, payload) {
		t.Fatalf("echo: %d bytes (want %d), err %v", len(got), len(payload), err)
	}
	r := a.wait(t, 1)[0]
	if r.BytesUp != int64(len(payload)) || r.BytesDown != int64(len(payload)) || r.Err != "" {
		t.Errorf("record: up %d down %d err %q, want %d each", r.BytesUp, r.BytesDown, r.Err, len(payload))
	}
}

func TestDeniedExplains(t *testing.T) {
	cases := []struct {
		name, phase string
		allow       []string
		request     string
		host, why   string
	}{
		{"connect in the agent phase", egress.PhaseAgent, nil,
			"CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n", "example.com:443", "allowlist is empty"},
		{"plain http in setup", egress.PhaseSetup, []string{"pypi.org", "*.pythonhosted.org"},
			"GET http://evil.example/x HTTP/1.1\r\nHost: evil.example\r\n\r\n", "evil.example:80", "allowlist is: pypi.org, *.pythonhosted.org"},
		{"suffix is not a subdomain", egress.PhaseSetup, []string{"*.pythonhosted.org"},
			"CONNECT pythonhosted.org.evil.com:443 HTTP/1.1\r\n\r\n", "pythonhosted.org.evil.com:443", "not on the setup phase's egress allowlist"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s, a := open(t, egress.SessionConfig{Phase: tc.phase, Allow: tc.allow, TaskID: "t-42"})
			c := dial(t, s)
			io.WriteString(c, tc.request)
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != 403 || resp.Header.Get(egress.Header) != "denied" {
				t.Fatalf("%s, %s %q", resp.Status, egress.Header, resp.Header.Get(egress.Header))
			}
			if want := "wrench egress policy denies " + tc.host + " in the " + tc.phase + " phase"; !strings.Contains(resp.Status, want) {
				t.Errorf("status line %q lacks %q", resp.Status, want)
			}
			for _, want := range []string{tc.host, "the " + tc.phase + " phase of task t-42", "server policy's egress allowlist decides",
				"Network access in the agent phase is off by default", tc.why} {
				if !strings.Contains(string(body), want) {
					t.Errorf("body lacks %q:\n%s", want, body)
				}
			}
			// Audited at once, before the connection or the session ends.
			r := a.wait(t, 1)[0]
			if r.Allowed || r.Host != tc.host || r.Rule != "" || r.Status != 403 || r.Phase != tc.phase || !strings.Contains(r.Reason, "allowlist") {
				t.Errorf("record = %+v", r)
			}
		})
	}
}

func TestDeniedReachesGoClientsErrorText(t *testing.T) {
	s, _ := open(t, egress.SessionConfig{Phase: egress.PhaseAgent})
	c, _ := client(s, nil)
	_, err := c.Get("https://example.com/")
	if err == nil || !strings.Contains(err.Error(), "wrench egress policy denies example.com:443 in the agent phase") {
		t.Errorf("client error = %v", err)
	}
}

func TestWildcardNeverReachesLoopback(t *testing.T) {
	host := tcpServer(t, echo)
	_, port, _ := net.SplitHostPort(host)
	for _, tc := range []struct {
		allow  []string
		target string
		want   int
	}{
		{[]string{"*"}, host, 403},
		{[]string{"*"}, "localhost:" + port, 403},
		{[]string{"127.0.0.1"}, host, 200},
		{[]string{"localhost:" + port}, "localhost:" + port, 200},
	} {
		s, a := open(t, egress.SessionConfig{Allow: tc.allow})
		resp, _ := connect(t, dial(t, s), tc.target)
		if resp.StatusCode != tc.want {
			t.Errorf("allow %v, CONNECT %s: %s, want %d", tc.allow, tc.target, resp.Status, tc.want)
		}
		if tc.want == 403 {
			if r := a.wait(t, 1)[0]; r.Allowed || !strings.Contains(r.Reason, "loopback address") {
				t.Errorf("record = %+v", r)
			}
		}
		s.Close()
	}
}

func TestDialFailed(t *testing.T) {
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	host := ln.Addr().String()
	ln.Close() // nothing listens there now
	s, a := open(t, egress.SessionConfig{Allow: []string{"127.0.0.1"}})
	resp, _ := connect(t, dial(t, s), host)
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 502 || resp.Header.Get(egress.Header) != "dial-failed" || !strings.Contains(string(body), "connection refused") {
		t.Errorf("%s %q", resp.Status, body)
	}
	if r := a.wait(t, 1)[0]; !r.Allowed || r.Status != 502 || !strings.Contains(r.Err, "connection refused") {
		t.Errorf("record = %+v", r)
	}
}

func TestRefusesWhatIsNotAProxyRequest(t *testing.T) {
	s, a := open(t, egress.SessionConfig{Allow: []string{"*"}, MaxHeaderBytes: 4096})
	cases := []struct{ request, status, want string }{
		{"GET /index.html HTTP/1.1\r\nHost: x\r\n\r\n", "400", "send requests with absolute URLs"},
		{"GET https://pypi.org/ HTTP/1.1\r\nHost: pypi.org\r\n\r\n", "400", "use CONNECT"},
		{"CONNECT pypi.org HTTP/1.1\r\n\r\n", "400", "CONNECT needs host:port"},
		{"CONNECT pypi.org:99999 HTTP/1.1\r\n\r\n", "400", "bad port"},
		{"NONSENSE\r\n\r\n", "400", "cannot read the request"},
		{"GET http://pypi.org/ HTTP/1.1\r\nX: " + strings.Repeat("a", 40_000) + "\r\n\r\n", "431", "request head is larger"},
	}
	for _, tc := range cases {
		c := dial(t, s)
		io.WriteString(c, tc.request)
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Errorf("%.30q: %v", tc.request, err)
			continue
		}
		body, _ := io.ReadAll(resp.Body)
		if !strings.HasPrefix(resp.Status, tc.status) || !strings.Contains(string(body), tc.want) || resp.Header.Get(egress.Header) != "bad-request" {
			t.Errorf("%.30q: %s %q", tc.request, resp.Status, body)
		}
	}
	s.Close()
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.recs) != 0 {
		t.Errorf("malformed requests were audited as connections: %+v", a.recs)
	}
}

func TestMaxConns(t *testing.T) {
	host := tcpServer(t, echo)
	s, _ := open(t, egress.SessionConfig{Allow: []string{"127.0.0.1"}, MaxConns: 1})
	if resp, _ := connect(t, dial(t, s), host); resp.StatusCode != 200 {
		t.Fatal(resp.Status)
	}
	resp, _ := connect(t, dial(t, s), host)
	if resp.StatusCode != 503 || resp.Header.Get(egress.Header) != "busy" {
		t.Errorf("second connection past MaxConns 1: %s", resp.Status)
	}
}

func TestIdleTimeout(t *testing.T) {
	// A server that sends one byte every 50 ms for 30 bytes, and never reads.
	trickle := tcpServer(t, func(c net.Conn) {
		for range 30 {
			if _, err := c.Write([]byte{'.'}); err != nil {
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
	})
	silent := tcpServer(t, func(c net.Conn) { io.Copy(io.Discard, c) })
	s, a := open(t, egress.SessionConfig{Allow: []string{"127.0.0.1"}, IdleTimeout: 300 * time.Millisecond})

	c := dial(t, s)
	_, br := connect(t, c, trickle)
	got, _ := io.ReadAll(br) // the client never writes: the download keeps it alive
	c.Close()
	if len(got) != 30 {
		t.Errorf("trickle: %d bytes, want 30 (cut while bytes flowed one way?)", len(got))
	}
	if r := a.wait(t, 1)[0]; r.Err != "" || r.BytesDown != 30 {
		t.Errorf("trickle record = %+v", r)
	}

	c = dial(t, s)
	_, br = connect(t, c, silent)
	begin := time.Now()
	io.ReadAll(br)
	if d := time.Since(begin); d > 10*time.Second {
		t.Errorf("idle tunnel closed after %s", d)
	}
	if r := a.wait(t, 2)[1]; !strings.Contains(r.Err, "idle for 300ms") {
		t.Errorf("idle record = %+v", r)
	}
}
