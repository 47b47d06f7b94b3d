package egress_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/wrenchworks/wrench/egress"
	"github.com/wrenchworks/wrench/sandbox"
)

func TestCloseEndsOpenTunnelsAndRequests(t *testing.T) {
	host := tcpServer(t, echo)
	never := make(chan struct{})
	defer close(never)
	slow, _ := backend(t, func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "started")
		w.(http.Flusher).Flush()
		select { // a download that does not end by itself
		case <-never:
		case <-r.Context().Done():
		}
	})
	s, a := open(t, egress.SessionConfig{Allow: []string{"127.0.0.1"}})
	var conns []net.Conn
	for range 3 {
		c := dial(t, s)
		_, br := connect(t, c, host)
		io.WriteString(c, "x")
		if _, err := io.ReadFull(br, make([]byte, 1)); err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
	}
	c := dial(t, s)
	fmt.Fprintf(c, "GET http://%s/ HTTP/1.1\r\nHost: %s\r\n\r\n", slow, slow)
	resp, err := http.ReadResponse(bufioNew(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(resp.Body, make([]byte, 7)); err != nil {
		t.Fatal(err)
	}
	conns = append(conns, c)

	done := make(chan error, 1)
	go func() { done <- s.Close() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Close: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not return with tunnels open")
	}
	if n := goroutinesIn(); n != 0 {
		t.Errorf("%d egress goroutines left after Close", n)
	}
	recs := a.wait(t, 4) // every one audited before Close returned
	for _, r := range recs {
		if !r.Allowed || r.Err != "the egress session closed" {
			t.Errorf("record = %+v", r)
		}
	}
	for _, c := range conns {
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := io.ReadAll(c); err != nil {
			t.Errorf("client connection not closed: %v", err)
		}
	}
	if _, err := os.Stat(filepath.Dir(s.Socket())); !os.IsNotExist(err) {
		t.Errorf("socket dir after Close: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

func TestOpenModesAndDirs(t *testing.T) {
	ctx := context.Background()
	t.Run("made and removed", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "run")
		old := syscallUmask(0o077) // a strict umask must not lock the sandbox user out
		s, err := egress.Open(ctx, egress.SessionConfig{Dir: dir, Phase: egress.PhaseSetup})
		syscallUmask(old)
		if err != nil {
			t.Fatal(err)
		}
		if s.Socket() != filepath.Join(dir, sandbox.EgressSocketName) {
			t.Errorf("socket %s", s.Socket())
		}
		for path, want := range map[string]os.FileMode{dir: os.ModeDir | 0o755, s.Socket(): os.ModeSocket | 0o666} {
			if fi, err := os.Stat(path); err != nil || fi.Mode() != want {
				t.Errorf("%s: mode %v (%v), want %v", path, fi.Mode(), err, want)
			}
		}
		s.Close()
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			t.Errorf("dir left after Close: %v", err)
		}
	})
	t.Run("existing dir kept, next session in the same place", func(t *testing.T) {
		dir := t.TempDir()
		s, err := egress.Open(ctx, egress.SessionConfig{Dir: dir, Phase: egress.PhaseSetup})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := egress.Open(ctx, egress.SessionConfig{Dir: dir, Phase: egress.PhaseAgent}); err == nil || !strings.Contains(err.Error(), "already being served") {
			t.Errorf("second session on a live socket: %v", err)
		}
		s.Close()
		if _, err := os.Stat(dir); err != nil {
			t.Errorf("existing dir removed: %v", err)
		}
		if _, err := os.Stat(s.Socket()); !os.IsNotExist(err) {
			t.Errorf("socket left: %v", err)
		}
		s2, err := egress.Open(ctx, egress.SessionConfig{Dir: dir, Phase: egress.PhaseAgent})
		if err != nil {
			t.Fatalf("next phase in the same dir: %v", err)
		}
		s2.Close()
	})
	t.Run("stale socket replaced", func(t *testing.T) {
		dir := t.TempDir()
		ln, _ := net.Listen("unix", filepath.Join(dir, sandbox.EgressSocketName))
		ln.(*net.UnixListener).SetUnlinkOnClose(false)
		ln.Close() // a crashed worker's socket: the file, nobody serving
		s, err := egress.Open(ctx, egress.SessionConfig{Dir: dir, Phase: egress.PhaseSetup})
		if err != nil {
			t.Fatalf("Open over a stale socket: %v", err)
		}
		s.Close()
	})
	for _, tc := range []struct {
		name string
		cfg  egress.SessionConfig
		want string
	}{
		{"phase", egress.SessionConfig{Dir: t.TempDir(), Phase: "build"}, `phase "build"`},
		{"relative", egress.SessionConfig{Dir: "run", Phase: egress.PhaseSetup}, "not an absolute path"},
		{"too long", egress.SessionConfig{Dir: "/" + strings.Repeat("d", 120), Phase: egress.PhaseSetup}, "the limit is 107"},
		{"a file", egress.SessionConfig{Dir: "/etc/hostname", Phase: egress.PhaseSetup}, "not a directory"},
	} {
		if _, err := egress.Open(ctx, tc.cfg); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
}

func TestSessionByteCap(t *testing.T) {
	oneMiB := bytes.Repeat([]byte("y"), 1<<20)
	flood := tcpServer(t, func(c net.Conn) { c.Write(oneMiB) })
	s, a := open(t, egress.SessionConfig{Allow: []string{"127.0.0.1"}, MaxSessionBytes: 150_000})
	_, br := connect(t, dial(t, s), flood)
	got, _ := io.ReadAll(br)
	if len(got) != 150_000 {
		t.Errorf("first tunnel delivered %d bytes, want the session's 150000", len(got))
	}
	if r := a.wait(t, 1)[0]; r.BytesDown != 150_000 || !strings.Contains(r.Err, "byte cap per session (150000 bytes)") {
		t.Errorf("record = %+v", r)
	}
	resp, _ := connect(t, dial(t, s), flood)
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 403 || !strings.Contains(string(body), "byte cap per session") {
		t.Errorf("after the cap: %s %q", resp.Status, body)
	}
	if r := a.wait(t, 2)[1]; r.Allowed {
		t.Errorf("record after the cap = %+v", r)
	}
}

func TestConnByteCapOnTunnel(t *testing.T) {
	oneMiB := bytes.Repeat([]byte("y"), 1<<20)
	flood := tcpServer(t, func(c net.Conn) { c.Write(oneMiB) })
	s, a := open(t, egress.SessionConfig{Allow: []string{"127.0.0.1"}, MaxConnBytes: 70_000})
	for i := range 2 { // the cap is per connection: the second gets its own
		_, br := connect(t, dial(t, s), flood)
		if got, _ := io.ReadAll(br); len(got) != 70_000 {
			t.Errorf("tunnel %d delivered %d bytes, want 70000", i, len(got))
		}
	}
	for _, r := range a.wait(t, 2) {
		if r.BytesDown != 70_000 || !strings.Contains(r.Err, "per connection") {
			t.Errorf("record = %+v", r)
		}
	}
}
