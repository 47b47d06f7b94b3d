package task_test

import (
	"strings"
	"testing"

	"github.com/wrenchworks/wrench/task"
)

func TestRedactURL(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"https://github.com/acme/calc.git", "https://github.com/acme/calc.git"},
		{"https://user:hunter2@git.example.com/r.git", "https://git.example.com/r.git"},
		{"https://oauth2:hunter2@gitlab.com/g/r.git?ref=x", "https://gitlab.com/g/r.git?ref=x"},
		{"https://git.example.com/r.git?access_token=hunter2", "https://git.example.com/r.git?access_token=REDACTED"},
		{"https://git.example.com/r.git?private_token=hunter2&x=1", "https://git.example.com/r.git?private_token=REDACTED&x=1"},
		{"/srv/repos/calc", "/srv/repos/calc"},
		{"file:///srv/repos/calc", "file:///srv/repos/calc"},
		// Malformed: url.Parse fails; the password still goes.
		{"https://user:hunter2@exa mple.com/r.git", "https://REDACTED@exa mple.com/r.git"},
		{"https://u:p@hunter2@host%zz/r.git", "https://REDACTED@host%zz/r.git"},
		{"https://host%zz/r.git?token=hunter2", "https://host%zz/r.git?REDACTED"},
	} {
		got := task.RedactURL(tc.in)
		if got != tc.want || strings.Contains(got, "hunter2") {
			t.Errorf("RedactURL(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// A malformed URL's validation error names the field, never the password.
func TestValidateNeverEchoesURLPasswords(t *testing.T) {
	for _, u := range []string{"https://user:hunter2@exa mple.com/r.git", "https://u:hunter2@host%zz/r.git", "ftp://u:hunter2@host/r.git"} {
		tk := task.Task{Repo: task.Repo{URL: u}, Instruction: "x"}
		err := tk.Validate()
		if err == nil || strings.Contains(err.Error(), "hunter2") || !strings.Contains(err.Error(), "repo.url") {
			t.Errorf("Validate(%q) = %v", u, err)
		}
	}
}
