package shim_test

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/wrenchworks/wrench/sandbox"
	"github.com/wrenchworks/wrench/sandbox/shim"
)

// fakeProxy serves a stand-in for the egress proxy on a unix socket in a
// fresh directory. It answers a hand-over with a nack (relay) or, when
// adopt is set, takes the client's socket and acks; either way it then
// echoes what the client sends, and half-closes when the client does.
func fakeProxy(t *testing.T, adopt bool) string {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "egress.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var open []net.Conn
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range open {
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
			wg.Add(1)
			go func() {
				defer wg.Done()
				client := take(t, c.(*net.UnixConn), adopt)
				mu.Lock()
				open = append(open, client)
				mu.Unlock()
				defer client.Close()
				io.Copy(client, client)
				client.(interface{ CloseWrite() error }).CloseWrite()
			}()
		}
	}()
	return sock
}

// take reads the hand-over and returns the connection to echo on.
func take(t *testing.T, c *net.UnixConn, adopt bool) net.Conn {
	buf, oob := make([]byte, 1), make([]byte, 64)
	_, oobn, _, _, err := c.ReadMsgUnix(buf, oob)
	if err != nil || buf[0] != sandbox.HandOverByte {
		t.Errorf("hand-over: byte %v, err %v", buf, err)
		return c
	}
	msgs, _ := syscall.ParseSocketControlMessage(oob[:oobn])
	fds, err := syscall.ParseUnixRights(&msgs[0])
	if err != nil || len(fds) != 1 {
		t.Errorf("hand-over: %d descriptors, %v", len(fds), err)
		return c
	}
	f := os.NewFile(uintptr(fds[0]), "client")
	defer f.Close()
	if !adopt {
		c.Write([]byte{sandbox.HandOverNack})
		return c
	}
	client, err := net.FileConn(f)
	if err != nil {
		t.Error(err)
		return c
	}
	c.Write([]byte{sandbox.HandOverAck})
	c.Close()
	return client
}

func forward(t *testing.T, sock string) *shim.Forwarder {
	t.Helper()
	f, err := shim.Forward("127.0.0.1:0", sock)
	if err != nil {
		t.Fatalf("Forward: %v", err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

func TestForwarderBothWaysWithHalfClose(t *testing.T) {
	for _, adopt := range []bool{false, true} {
		t.Run(map[bool]string{false: "relayed", true: "handed over"}[adopt], func(t *testing.T) {
			bothWays(t, forward(t, fakeProxy(t, adopt)))
			if n := goroutinesIn("shim.(*Forwarder).serve"); adopt && n != 0 {
				t.Errorf("%d connection goroutines in the shim after a hand-over", n)
			}
		})
	}
}

func bothWays(t *testing.T, f *shim.Forwarder) {
	c, err := net.Dial("tcp", f.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	payload := strings.Repeat("0123456789abcdef", 1<<16) // 1 MiB
	go func() {
		io.WriteString(c, payload)
		c.(*net.TCPConn).CloseWrite() // the echo ends only when this reaches it
	}()
	c.SetDeadline(time.Now().Add(30 * time.Second))
	got, err := io.ReadAll(c)
	if err != nil {
		t.Fatalf("read: %v", err)
	}
	if string(got) != payload {
		t.Fatalf("echoed %d bytes, want %d identical", len(got), len(payload))
	}
}

func TestForwarderWithoutProxyExplains(t *testing.T) {
	f := forward(t, filepath.Join(t.TempDir(), "egress.sock")) // nothing serves it
	c, err := net.Dial("tcp", f.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	io.WriteString(c, "GET http://example.com/ HTTP/1.1\r\nHost: example.com\r\n\r\n")
	c.SetDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusForbidden || resp.Header.Get("X-Wrench-Egress") != "off" {
		t.Fatalf("status %d, X-Wrench-Egress %q", resp.StatusCode, resp.Header.Get("X-Wrench-Egress"))
	}
	for _, want := range []string{"example.com was not contacted", "no egress proxy is serving", "agent phase it is off by default"} {
		if !strings.Contains(string(body), want) {
			t.Errorf("body lacks %q:\n%s", want, body)
		}
	}
}

func TestForwarderCloseEndsOpenConnections(t *testing.T) {
	f, err := shim.Forward("127.0.0.1:0", fakeProxy(t, false))
	if err != nil {
		t.Fatal(err)
	}
	var conns []net.Conn
	for range 3 {
		c, err := net.Dial("tcp", f.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		io.WriteString(c, "x") // make sure the splice is up
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		if _, err := io.ReadFull(c, make([]byte, 1)); err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
	}
	if err := f.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	for _, c := range conns {
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		if _, err := c.Read(make([]byte, 1)); err == nil {
			t.Error("a forwarded connection is still open after Close")
		}
	}
	if n := goroutinesIn("shim.(*Forwarder)"); n != 0 {
		t.Errorf("%d forwarder goroutines left after Close", n)
	}
	if err := f.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

// goroutinesIn counts goroutines with fn on their stack.
func goroutinesIn(fn string) int {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	n := 0
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, fn) {
			n++
		}
	}
	return n
}
