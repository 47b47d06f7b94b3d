package task_test

import (
	"encoding/json"
	"errors"
	"net/url"
	"reflect"
	"strings"
	"testing"

	"github.com/wrenchworks/wrench/task"
)

// FuzzDecode: whatever a client sends, Decode either returns a task or a
// *ValidationError; a decoded task validates without panicking, survives
// a JSON round trip unchanged, and its redacted form carries no password
// of its repository URL.
func FuzzDecode(f *testing.F) {
	for _, s := range []string{
		`{"repo":{"url":"https://github.com/acme/calc.git"},"instruction":"Fix Add."}`,
		`{"id":"t-1","repo":{"url":"https://u:p4ss@h/r.git?access_token=x","ref":"main","commit":"abc1"},"instruction":"x","test_command":"go test ./...","limits":{"max_turns":5,"timeout":"10m"},"sandbox":{"network":"bridge","pids":4000000,"memory_mb":1000000},"model":"scripted:/etc/shadow","image":"alpine"}`,
		`{"repo":{"url":"/etc"},"instruction":"x","allowed_tools":["bash","bsh"],"mode":"plan"}`,
		`{"repo":{"url":"x"},"instruction":"x"} {}`, `{"unknown":1}`, `[]`, `null`, ``, `{"limits":{"timeout":"-1s"}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		tk, err := task.Decode(data)
		if err != nil {
			var ve *task.ValidationError
			if !errors.As(err, &ve) || len(ve.Fields) == 0 {
				t.Fatalf("Decode error %T %v is not a ValidationError naming a field", err, err)
			}
			return
		}
		_ = tk.Validate()
		b, err := json.Marshal(tk)
		if err != nil {
			t.Fatalf("marshal a decoded task: %v", err)
		}
		again, err := task.Decode(b)
		if err != nil {
			t.Fatalf("a marshalled task does not decode: %v\n%s", err, b)
		}
		if !reflect.DeepEqual(tk, again) {
			t.Fatalf("round trip changed the task:\n%+v\n%+v", tk, again)
		}
		red := tk.Redacted().Repo.URL
		if u, err := url.Parse(tk.Repo.URL); err == nil && u.User != nil {
			if pw, ok := u.User.Password(); ok && len(pw) >= 4 && strings.Contains(red, pw) && !strings.Contains(u.Host+u.Path, pw) {
				t.Fatalf("redacted URL %q keeps the password %q", red, pw)
			}
		}
	})
}
