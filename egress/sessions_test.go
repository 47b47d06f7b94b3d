package egress_test

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/wrenchworks/wrench/egress"
	"github.com/wrenchworks/wrench/sandbox"
	"github.com/wrenchworks/wrench/task"
)

// connectVia asks the session's socket for a CONNECT tunnel and returns the
// status and body.
func connectVia(t *testing.T, dir, host string) (int, string) {
	t.Helper()
	c, err := net.Dial("unix", filepath.Join(dir, sandbox.EgressSocketName))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	io.WriteString(c, "CONNECT "+host+" HTTP/1.1\r\nHost: "+host+"\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

func TestSessions(t *testing.T) {
	s := &egress.Sessions{Dir: filepath.Join(t.TempDir(), "eg"), CABundle: []byte("-----BEGIN CERTIFICATE-----\n")}
	var mu sync.Mutex
	var events []task.Event
	record := func(ev task.Event) { mu.Lock(); events = append(events, ev); mu.Unlock() }
	dir, done, err := s.Open(context.Background(), "warm-pool", egress.PhaseAgent, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if ca, err := os.ReadFile(filepath.Join(dir, sandbox.EgressCAName)); err != nil || !strings.HasPrefix(string(ca), "-----BEGIN") {
		t.Errorf("CA bundle in the session dir: %q, %v", ca, err)
	}
	// Before it is assigned, a warm sandbox's session denies everything
	// and reports to nobody.
	if code, _ := connectVia(t, dir, "example.com:443"); code != http.StatusForbidden {
		t.Errorf("status %d before assignment", code)
	}
	if err := s.Assign(dir, "t-42", []string{"example.org"}, record); err != nil {
		t.Fatal(err)
	}
	code, body := connectVia(t, dir, "example.com:443")
	if code != http.StatusForbidden || !strings.Contains(body, "t-42") {
		t.Errorf("after assignment: %d %q", code, body)
	}
	hosts := done()
	if len(hosts) != 1 || hosts[0].Host != "example.com:443" || hosts[0].Connections != 2 {
		t.Errorf("summary %+v", hosts)
	}
	if len(events) != 1 || events[0].Kind != task.EventEgress || events[0].TaskID != "t-42" ||
		events[0].Egress == nil || events[0].Egress.Allowed || !strings.HasPrefix(events[0].Text, "egress denied example.com:443") {
		t.Errorf("events %+v", events)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("session dir after done: %v", err)
	}
	if err := s.Assign(dir, "t-43", nil, nil); err == nil {
		t.Error("assigning a closed session succeeded")
	}
}
