package sandboxtest

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"testing"
	"time"

	"github.com/wrenchworks/wrench/sandbox"
)

func testExec(t *testing.T, newEnv Factory) {
	ctx := context.Background()
	env, root := open(t, newEnv, map[string]string{"a.txt": "A\n", "dir/b.txt": "B\n"})
	if err := env.WriteFile(ctx, "dir/written.txt", []byte("W\n"), 0); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		req  sandbox.ExecRequest
		code int
		out  string
	}{
		{sandbox.ExecRequest{Command: "echo hi"}, 0, "hi\n"},
		{sandbox.ExecRequest{Command: "exit 3"}, 3, ""},
		{sandbox.ExecRequest{Command: "false"}, 1, ""},
		{sandbox.ExecRequest{Command: "pwd"}, 0, root + "\n"},
		{sandbox.ExecRequest{Command: "pwd", Dir: "dir"}, 0, root + "/dir\n"},
		{sandbox.ExecRequest{Command: "pwd", Dir: root + "/dir"}, 0, root + "/dir\n"},
		{sandbox.ExecRequest{Command: "cat a.txt"}, 0, "A\n"},
		{sandbox.ExecRequest{Command: "cat written.txt", Dir: "dir"}, 0, "W\n"},
		{sandbox.ExecRequest{Command: "cat", Stdin: []byte("from stdin")}, 0, "from stdin"},
	}
	for _, tt := range tests {
		res, err := env.Exec(ctx, tt.req)
		if err != nil {
			t.Errorf("Exec(%q in %q): %v", tt.req.Command, tt.req.Dir, err)
			continue
		}
		if res.ExitCode != tt.code || string(res.Output) != tt.out || res.TimedOut {
			t.Errorf("Exec(%q in %q) = %d %q (timed out %v), want %d %q", tt.req.Command, tt.req.Dir, res.ExitCode, res.Output, res.TimedOut, tt.code, tt.out)
		}
	}
	_, err := env.Exec(ctx, sandbox.ExecRequest{Command: "pwd", Dir: "missing"})
	wantErr(t, "Exec(dir missing)", err, fs.ErrNotExist)
	_, err = env.Exec(ctx, sandbox.ExecRequest{Command: "pwd", Dir: "a.txt"})
	wantErr(t, "Exec(dir a file)", err, sandbox.ErrNotDir)

	start := time.Now()
	res, err := env.Exec(ctx, sandbox.ExecRequest{Command: "sleep 30", Timeout: 300 * time.Millisecond})
	if err != nil || !res.TimedOut || res.ExitCode == 0 {
		t.Errorf("Exec(sleep past its timeout) = %+v, %v; want TimedOut and a non-zero exit", res, err)
	}
	if d := time.Since(start); d > 15*time.Second {
		t.Errorf("a 300ms timeout took %v", d)
	}

	cctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	_, err = env.Exec(cctx, sandbox.ExecRequest{Command: "sleep 30"})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Exec with a context that ends = %v, want the context's error", err)
	}
	if res, err := env.Exec(ctx, sandbox.ExecRequest{Command: "echo still"}); err != nil || string(res.Output) != "still\n" {
		t.Errorf("Exec after a cancelled one = %q, %v", res.Output, fmt.Sprint(err))
	}
}
