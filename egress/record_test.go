package egress_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/wrenchworks/wrench/egress"
	"github.com/wrenchworks/wrench/task"
)

func TestRecordEvent(t *testing.T) {
	start := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	cases := []struct {
		r       egress.Record
		text    string
		isError bool
	}{
		{egress.Record{Host: "pypi.org:443", Allowed: true, Method: "CONNECT", Reason: `allowed by "pypi.org"`, BytesUp: 10, BytesDown: 2000},
			`egress allowed pypi.org:443 (CONNECT), 10 bytes up, 2000 down: allowed by "pypi.org"`, false},
		{egress.Record{Host: "evil.example:80", Reason: "not on the agent phase's egress allowlist"},
			"egress denied evil.example:80: not on the agent phase's egress allowlist", true},
		{egress.Record{Host: "x.org:443", Allowed: true, Method: "CONNECT", Reason: `allowed by "x.org"`, Err: "idle for 2m0s"},
			`egress allowed x.org:443 (CONNECT), 0 bytes up, 0 down: allowed by "x.org"; idle for 2m0s`, true},
	}
	for _, c := range cases {
		c.r.TaskID, c.r.Phase, c.r.Start, c.r.Duration = "t-1", "setup", start, time.Second
		ev := c.r.Event()
		if ev.Kind != task.EventEgress || ev.Text != c.text || ev.IsError != c.isError || ev.TaskID != "t-1" || ev.Phase != "setup" || !ev.Time.Equal(start.Add(time.Second)) {
			t.Errorf("Event() = %+v\nwant text %q", ev, c.text)
		}
	}
}

func TestSummary(t *testing.T) {
	var s egress.Summary
	s.Add(egress.Record{Host: "b.org:443", Allowed: true, BytesUp: 1, BytesDown: 10})
	s.Add(egress.Record{Host: "b.org:443", Allowed: true, BytesUp: 2, BytesDown: 20})
	s.Add(egress.Record{Host: "b.org:443"})
	s.Add(egress.Record{Host: "a.org:80", Allowed: true, BytesDown: 5})
	got := fmt.Sprint(s.Hosts())
	want := fmt.Sprint([]task.EgressSummary{
		{Host: "a.org:80", Allowed: true, Connections: 1, Bytes: 5},
		{Host: "b.org:443", Allowed: false, Connections: 1},
		{Host: "b.org:443", Allowed: true, Connections: 2, Bytes: 33},
	})
	if got != want {
		t.Errorf("Hosts() = %s\nwant %s", got, want)
	}
	for i := range 300 { // bounded: hosts past the cap are pooled
		s.Add(egress.Record{Host: fmt.Sprintf("h%d:80", i)})
	}
	if hosts := s.Hosts(); len(hosts) > 260 || hosts[0].Host != egress.OtherHosts {
		t.Errorf("%d hosts, first %q", len(hosts), hosts[0].Host)
	}
}
