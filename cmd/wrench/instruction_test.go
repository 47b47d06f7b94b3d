package main

import (
	"os"
	"path/filepath"
	"testing"
)

func TestReadInstruction(t *testing.T) {
	file := filepath.Join(t.TempDir(), "task.md")
	os.WriteFile(file, []byte("Fix the pager.\n"), 0o644)
	cases := []struct {
		in, want string
		err      bool
	}{
		{"plain text", "plain text", false},
		{"@" + file, "Fix the pager.\n", false},
		{"@" + file + ".missing", "", true},
	}
	for _, c := range cases {
		got, err := readInstruction(c.in)
		if got != c.want || (err != nil) != c.err {
			t.Errorf("readInstruction(%q) = %q, %v; want %q, error %v", c.in, got, err, c.want, c.err)
		}
	}
}
