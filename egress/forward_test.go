package egress_test

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wrenchworks/wrench/egress"
)

// backend is a plain-HTTP host on loopback that counts its connections.
func backend(t *testing.T, h http.HandlerFunc) (host string, conns *atomic.Int32) {
	t.Helper()
	conns = new(atomic.Int32)
	srv := httptest.NewUnstartedServer(h)
	srv.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	return srv.Listener.Addr().String(), conns
}

func TestForwardKeepsAliveBothSidesAndCountsBodies(t *testing.T) {
	host, hostConns := backend(t, func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		fmt.Fprintf(w, "%s %s %d", r.Method, r.URL.Path, len(body))
	})
	s, a := open(t, egress.SessionConfig{Allow: []string{"127.0.0.1"}})
	c, dials := client(s, nil)
	for i, size := range []int{0, 5, 100_000} {
		method, body := http.MethodGet, io.Reader(nil)
		if size > 0 {
			method, body = http.MethodPost, bytes.NewReader(make([]byte, size))
		}
		req, _ := http.NewRequest(method, fmt.Sprintf("http://%s/r%d", host, i), body)
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		got, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if want := fmt.Sprintf("%s /r%d %d", method, i, size); string(got) != want {
			t.Errorf("response %q, want %q", got, want)
		}
	}
	if *dials != 1 || hostConns.Load() != 1 {
		t.Errorf("3 requests used %d client and %d host connections, want 1 each (keep-alive)", *dials, hostConns.Load())
	}
	recs := a.wait(t, 3)
	for i, size := range []int{0, 5, 100_000} {
		r := recs[i]
		wantDown := int64(len(fmt.Sprintf("X /r%d %d", i, size)) + len(r.Method) - 1)
		if !r.Allowed || r.Host != host || r.Status != 200 || r.BytesUp != int64(size) || r.BytesDown != wantDown || r.Err != "" {
			t.Errorf("record %d = %+v, want %d bytes up, %d down", i, r, size, wantDown)
		}
	}
}

func TestForwardStreamsBothWays(t *testing.T) {
	gotFirst := make(chan struct{})
	sendRest := make(chan struct{})
	var once sync.Once
	release := func() { once.Do(func() { close(sendRest) }) }
	defer release()
	host, _ := backend(t, func(w http.ResponseWriter, r *http.Request) {
		// Upload: the first part arrives while the client still holds the rest.
		buf := make([]byte, 5)
		if _, err := io.ReadFull(r.Body, buf); err != nil || string(buf) != "first" {
			t.Errorf("first part: %q %v", buf, err)
		}
		close(gotFirst)
		rest, _ := io.ReadAll(r.Body)
		// Download: the first chunk reaches the client before the second is written.
		fmt.Fprintf(w, "got %s+%s;", buf, rest)
		w.(http.Flusher).Flush()
		<-sendRest
		io.WriteString(w, "second")
	})
	s, a := open(t, egress.SessionConfig{Allow: []string{"127.0.0.1"}})
	c, _ := client(s, nil)
	pr, pw := io.Pipe()
	go func() {
		io.WriteString(pw, "first")
		select {
		case <-gotFirst:
		case <-time.After(10 * time.Second):
			t.Error("the first part of the upload was held back by the proxy")
		}
		io.WriteString(pw, "rest")
		pw.Close()
	}()
	req, _ := http.NewRequest(http.MethodPut, "http://"+host+"/up", pr) // chunked: no length
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(resp.Body)
	first, err := br.ReadString(';')
	if err != nil || first != "got first+rest;" {
		t.Fatalf("first chunk %q, %v", first, err)
	}
	release()
	rest, _ := io.ReadAll(br)
	resp.Body.Close()
	if string(rest) != "second" {
		t.Errorf("second chunk %q", rest)
	}
	if r := a.wait(t, 1)[0]; r.BytesUp != 9 || r.BytesDown != int64(len(first)+6) || r.Err != "" {
		t.Errorf("record = %+v", r)
	}
}

func TestForwardAddsNothingAndStripsHopByHop(t *testing.T) {
	var seen atomic.Value
	host, _ := backend(t, func(w http.ResponseWriter, r *http.Request) {
		var b strings.Builder
		r.Header.Write(&b)
		seen.Store(b.String())
		w.Header().Set("Connection", "X-Hop-Down")
		w.Header().Set("X-Hop-Down", "1")
		w.Header().Set("X-End-To-End", "kept")
		io.WriteString(w, "ok")
	})
	s, _ := open(t, egress.SessionConfig{Allow: []string{"127.0.0.1"}})
	c := dial(t, s)
	fmt.Fprintf(c, "GET http://%s/h HTTP/1.1\r\nHost: %s\r\nProxy-Authorization: Basic c2VjcmV0\r\nProxy-Connection: keep-alive\r\n"+
		"Connection: X-Hop-Up\r\nX-Hop-Up: 1\r\nKeep-Alive: 300\r\nTe: trailers\r\nX-Kept: yes\r\n\r\n", host, host)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	if string(body) != "ok" || resp.Header.Get("X-Hop-Down") != "" || resp.Header.Get("X-End-To-End") != "kept" {
		t.Errorf("response %q, headers %v", body, resp.Header)
	}
	got, _ := seen.Load().(string)
	// Only what the client sent end to end: no User-Agent, Via or credentials added.
	if want := "X-Kept: yes\r\n"; got != want {
		t.Errorf("the host saw headers %q, want %q", got, want)
	}
}

func TestForwardRetriesOnAConnectionTheHostClosed(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }))
	defer srv.Close()
	host := srv.Listener.Addr().String()
	s, a := open(t, egress.SessionConfig{Allow: []string{"127.0.0.1"}})
	c := dial(t, s)
	br := bufio.NewReader(c)
	get := func() string {
		fmt.Fprintf(c, "GET http://%s/ HTTP/1.1\r\nHost: %s\r\n\r\n", host, host)
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		return resp.Status + " " + string(body)
	}
	get()
	a.wait(t, 1)
	// The host drops the idle connection (as servers do after their
	// keep-alive timeout); the next request on the client's connection
	// still succeeds, on a new host connection.
	srv.CloseClientConnections()
	time.Sleep(50 * time.Millisecond)
	if got := get(); got != "200 OK ok" {
		t.Errorf("after the host closed: %q", got)
	}
	if r := a.wait(t, 2)[1]; r.Err != "" || r.Status != 200 {
		t.Errorf("record = %+v", r)
	}
}

func TestForwardCap(t *testing.T) {
	big := bytes.Repeat([]byte("x"), 1<<20)
	host, _ := backend(t, func(w http.ResponseWriter, r *http.Request) { w.Write(big) })
	s, a := open(t, egress.SessionConfig{Allow: []string{"127.0.0.1"}, MaxConnBytes: 100_000})
	c, _ := client(s, nil)
	resp, err := c.Get("http://" + host + "/big")
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err == nil || len(got) != 100_000 {
		t.Errorf("capped download: %d bytes, err %v; want 100000 and an error", len(got), err)
	}
	if r := a.wait(t, 1)[0]; r.BytesDown != 100_000 || !strings.Contains(r.Err, "byte cap per connection (100000 bytes)") {
		t.Errorf("record = %+v", r)
	}
}

func TestForwardAnswersExpectContinue(t *testing.T) {
	host, _ := backend(t, func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		fmt.Fprintf(w, "%s expect=%q", body, r.Header.Get("Expect"))
	})
	s, a := open(t, egress.SessionConfig{Allow: []string{"127.0.0.1"}})
	c := dial(t, s)
	fmt.Fprintf(c, "POST http://%s/ HTTP/1.1\r\nHost: %s\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n", host, host)
	br := bufio.NewReader(c)
	line, err := br.ReadString('\n') // the body is held back until the proxy says go on
	if err != nil || line != "HTTP/1.1 100 Continue\r\n" {
		t.Fatalf("first line %q, %v", line, err)
	}
	br.ReadString('\n')
	io.WriteString(c, "hello")
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	if string(body) != `hello expect=""` {
		t.Errorf("body %q", body)
	}
	if r := a.wait(t, 1)[0]; r.BytesUp != 5 || r.Status != 200 {
		t.Errorf("record = %+v", r)
	}
}
