package egress_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/wrenchworks/wrench/egress"
	"github.com/wrenchworks/wrench/sandbox"
	"github.com/wrenchworks/wrench/sandbox/shim"
)

// TestShimHandsClientsOver runs the sandbox side for real (in this network
// namespace): the shim's forwarder passes each accepted client to the
// session, which serves it on the client's own socket.
func TestShimHandsClientsOver(t *testing.T) {
	host, _ := backend(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "through") })
	s, a := open(t, egress.SessionConfig{Allow: []string{"127.0.0.1"}})
	f, err := shim.Forward("127.0.0.1:0", s.Socket())
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	c, err := net.Dial("tcp", f.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	br := bufio.NewReader(c)
	for range 2 { // keep-alive on the handed-over socket
		fmt.Fprintf(c, "GET http://%s/ HTTP/1.1\r\nHost: %s\r\n\r\n", host, host)
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		if string(body) != "through" {
			t.Errorf("body %q", body)
		}
	}
	if n := goroutinesInShim(); n != 0 {
		t.Errorf("%d shim goroutines serve a handed-over client", n)
	}
	c.Close()
	s.Close() // every record audited
	if recs := a.wait(t, 2); recs[1].BytesDown != 7 || !recs[1].Allowed {
		t.Errorf("records = %+v", recs)
	}
}

func goroutinesInShim() int {
	n := 0
	for _, g := range strings.Split(stacks(), "\n\n") {
		if strings.Contains(g, "shim.(*Forwarder).serve") {
			n++
		}
	}
	return n
}

// TestHandOverRefusals: a hand-over byte with no descriptor, with one
// that is not a TCP socket, or with several, is declined (the descriptors
// closed) and the connection served as a byte stream.
func TestHandOverRefusals(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	pipe := int(r.Fd())
	cases := map[string][]byte{
		"no descriptor":   nil,
		"a pipe":          syscall.UnixRights(pipe),
		"two descriptors": syscall.UnixRights(pipe, pipe),
	}
	for name, oob := range cases {
		t.Run(name, func(t *testing.T) {
			s, _ := open(t, egress.SessionConfig{Phase: egress.PhaseAgent})
			c := dial(t, s).(*net.UnixConn)
			if _, _, err := c.WriteMsgUnix([]byte{sandbox.HandOverByte}, oob, nil); err != nil {
				t.Fatal(err)
			}
			br := bufio.NewReader(c)
			if b, err := br.ReadByte(); err != nil || b != sandbox.HandOverNack {
				t.Fatalf("answer %v, %v; want the nack", b, err)
			}
			io.WriteString(c, "CONNECT example.com:443 HTTP/1.1\r\n\r\n")
			resp, err := http.ReadResponse(br, nil)
			if err != nil || resp.StatusCode != 403 {
				t.Fatalf("then as a byte stream: %v %v", resp, err)
			}
		})
	}
}
