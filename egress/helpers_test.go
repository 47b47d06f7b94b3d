package egress_test

import (
	"bufio"
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"net/url"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/wrenchworks/wrench/egress"
)

// audit collects a session's records.
type audit struct {
	mu   sync.Mutex
	recs []egress.Record
	more chan struct{}
}

func (a *audit) add(r egress.Record) {
	a.mu.Lock()
	a.recs = append(a.recs, r)
	a.mu.Unlock()
	select {
	case a.more <- struct{}{}:
	default:
	}
}

// wait returns the first n records, waiting up to 10 s for them.
func (a *audit) wait(t *testing.T, n int) []egress.Record {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		a.mu.Lock()
		if len(a.recs) >= n {
			out := append([]egress.Record(nil), a.recs...)
			a.mu.Unlock()
			return out
		}
		a.mu.Unlock()
		select {
		case <-a.more:
		case <-time.After(10 * time.Millisecond):
		case <-deadline:
			t.Fatalf("waited for %d records, have %d", n, len(a.recs))
		}
	}
}

// open starts a session in a fresh directory, closed at cleanup.
func open(t *testing.T, cfg egress.SessionConfig) (*egress.Session, *audit) {
	t.Helper()
	a := &audit{more: make(chan struct{}, 1)}
	cfg.Dir = filepath.Join(t.TempDir(), "run")
	if cfg.Phase == "" {
		cfg.Phase = egress.PhaseSetup
	}
	if cfg.TaskID == "" {
		cfg.TaskID = "t-1"
	}
	cfg.Audit = a.add
	s, err := egress.Open(context.Background(), cfg)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s, a
}

// dial connects to the session's socket, as the sandbox's forwarder does.
func dial(t *testing.T, s *egress.Session) net.Conn {
	t.Helper()
	c, err := net.Dial("unix", s.Socket())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(30 * time.Second))
	return c
}

// client is an HTTP client whose proxy is the session; dials counts its
// connections to the proxy.
func client(s *egress.Session, tlsConf *tls.Config) (*http.Client, *int) {
	dials := new(int)
	var mu sync.Mutex
	tr := &http.Transport{
		Proxy: http.ProxyURL(&url.URL{Scheme: "http", Host: "egress.invalid:3128"}),
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			mu.Lock()
			*dials++
			mu.Unlock()
			var d net.Dialer
			return d.DialContext(ctx, "unix", s.Socket())
		},
		TLSClientConfig:   tlsConf,
		ForceAttemptHTTP2: false,
	}
	return &http.Client{Transport: tr, Timeout: 30 * time.Second}, dials
}

// connect sends CONNECT host on c and returns the proxy's response.
func connect(t *testing.T, c net.Conn, host string) (*http.Response, *bufio.Reader) {
	t.Helper()
	io.WriteString(c, "CONNECT "+host+" HTTP/1.1\r\nHost: "+host+"\r\nProxy-Authorization: Basic c2VjcmV0\r\n\r\n")
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
	if err != nil {
		t.Fatalf("CONNECT %s: %v", host, err)
	}
	return resp, br
}

// tcpServer serves each connection with fn on a loopback port.
func tcpServer(t *testing.T, fn func(net.Conn)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	conns := map[net.Conn]bool{}
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns[c] = true
			mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				fn(c)
			}()
		}
	}()
	return ln.Addr().String()
}

// echo copies back what it reads and half-closes when the client does.
func echo(c net.Conn) {
	io.Copy(c, c)
	c.(*net.TCPConn).CloseWrite()
}

func stacks() string {
	buf := make([]byte, 4<<20)
	return string(buf[:runtime.Stack(buf, true)])
}

// goroutinesIn counts goroutines with a frame of package egress.
func goroutinesIn() int {
	n := 0
	for _, g := range strings.Split(stacks(), "\n\n") {
		if strings.Contains(g, "wrench/egress.") {
			n++
		}
	}
	return n
}

// noGoroutinesLeft waits briefly for the package's goroutines to end.
func noGoroutinesLeft(t *testing.T) {
	t.Helper()
	for range 100 {
		if goroutinesIn() == 0 {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	buf := make([]byte, 1<<20)
	t.Errorf("%d egress goroutines left:\n%s", goroutinesIn(), buf[:runtime.Stack(buf, true)])
}

func bufioNew(c net.Conn) *bufio.Reader { return bufio.NewReader(c) }

func syscallUmask(m int) int { return syscall.Umask(m) }
