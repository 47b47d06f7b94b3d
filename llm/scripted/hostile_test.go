package scripted_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wrenchworks/wrench/llm/scripted"
)

// A file that is not a script, named as one (`model: scripted:/etc/shadow`
// on a server that allows scripted models), is refused by line number:
// its contents used to come back in the error, and from there in the
// task's reason, the log and the stored state.
func TestHostileClient_NotAScriptIsNotEchoed(t *testing.T) {
	for _, body := range []string{
		"root:$6$hunter2hash$xyz:19000:0:99999:7:::\ndaemon:*:19000:0:99999:7:::\n",
		"steps: hunter2-as-a-value-that-is-long\n",
		"- hunter2 list item\n- another\n",
	} {
		f := filepath.Join(t.TempDir(), "shadow")
		if err := os.WriteFile(f, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := scripted.Load(f)
		if err == nil || strings.Contains(err.Error(), "hunter2") || !strings.Contains(err.Error(), "line 1") {
			t.Errorf("Load(%q) = %v", body, err)
		}
	}
	// A real script's typo still names the key.
	_, err := scripted.Parse([]byte("stpes: []\n"))
	if err == nil || !strings.Contains(err.Error(), "stpes") {
		t.Errorf("typo: %v", err)
	}
}
