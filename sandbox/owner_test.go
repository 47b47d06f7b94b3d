package sandbox

import (
	"os"
	"strconv"
	"testing"
	"time"
)

func TestParseProcStat(t *testing.T) {
	// A command name with spaces and a parenthesis, a zombie.
	line := "4242 (we ird) (x) Z 1 4242 4242 0 -1 4194560 90 0 0 0 0 0 0 0 20 0 1 0 8765432 0 0 18446744073709551615 0 0 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0\n"
	st, err := parseProcStat([]byte(line))
	if err != nil || st.State != 'Z' || st.Start != 8765432 {
		t.Fatalf("parse = %+v, %v; want state Z, start 8765432", st, err)
	}
	for _, bad := range []string{"", "1 (x) R 1 2", "1 x R"} {
		if _, err := parseProcStat([]byte(bad)); err == nil {
			t.Errorf("parsed %q", bad)
		}
	}
}

func TestOwnerLabelsNameThisProcess(t *testing.T) {
	l := OwnerLabels("h")
	if l[LabelOwnerPID] != strconv.Itoa(os.Getpid()) || l[LabelOwnerHost] != "h" {
		t.Fatalf("labels = %v", l)
	}
	st, err := ReadProcStat(os.Getpid())
	if err != nil {
		t.Skipf("no /proc here: %v", err)
	}
	if l[LabelOwnerStart] != strconv.FormatUint(st.Start, 10) || st.State == 'Z' {
		t.Errorf("start label %q, this process's stat %+v", l[LabelOwnerStart], st)
	}
}

// TestResourceLabels: a resource's labels name its deployment, task and
// owner, and its creation time parses as RFC 3339 (the reaper's reading).
func TestResourceLabels(t *testing.T) {
	before := time.Now()
	l := ResourceLabels("prod", "t-1", OwnerLabels("here"))
	if l[LabelManaged] != "true" || l[LabelDeployment] != "prod" || l[LabelTask] != "t-1" ||
		l[LabelOwnerHost] != "here" || l[LabelOwnerPID] != strconv.Itoa(os.Getpid()) {
		t.Errorf("labels = %v", l)
	}
	created, err := time.Parse(time.RFC3339, l[LabelCreated])
	if err != nil || created.Before(before.Add(-time.Second)) || created.After(time.Now()) {
		t.Errorf("created %q: %v, %v", l[LabelCreated], created, err)
	}
}
