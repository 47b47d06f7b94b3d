package queue_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/wrenchworks/wrench/task"
)

func TestListNewestFirstFilterAndCursor(t *testing.T) {
	c := connect(t, startNATS(t, ""))
	ctx := context.Background()
	base := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range 7 {
		tk := newTask(fmt.Sprintf("t-%d", i))
		tk.CreatedAt = base.Add(time.Duration(i) * time.Minute)
		submit(t, c, tk)
	}
	for _, id := range []string{"t-1", "t-4"} {
		if _, err := c.Submissions().Cancel(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	ids := func(sts []task.Status) string {
		s := ""
		for _, st := range sts {
			s += st.TaskID + " "
		}
		return s
	}
	tests := []struct {
		name  string
		opts  task.ListOptions
		pages []string
	}{
		{"all in one page", task.ListOptions{}, []string{"t-6 t-5 t-4 t-3 t-2 t-1 t-0 "}},
		{"pages of 3", task.ListOptions{Limit: 3}, []string{"t-6 t-5 t-4 ", "t-3 t-2 t-1 ", "t-0 "}},
		{"cancelled only", task.ListOptions{State: task.StateCancelled, Limit: 1}, []string{"t-4 ", "t-1 "}},
		{"queued", task.ListOptions{State: task.StateQueued, Limit: 5}, []string{"t-6 t-5 t-3 t-2 t-0 "}},
		{"none running", task.ListOptions{State: task.StateRunning}, []string{""}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := tc.opts
			for i, want := range tc.pages {
				sts, next, err := c.States().List(ctx, o)
				if err != nil {
					t.Fatal(err)
				}
				if got := ids(sts); got != want {
					t.Fatalf("page %d = %q, want %q", i, got, want)
				}
				if last := i == len(tc.pages)-1; last != (next == "") {
					t.Fatalf("page %d cursor = %q (last page: %v)", i, next, last)
				}
				o.Cursor = next
			}
		})
	}
	for _, bad := range []string{"garbage", "12~", "x~t-1"} {
		if _, _, err := c.States().List(ctx, task.ListOptions{Cursor: bad}); !errors.Is(err, task.ErrBadCursor) {
			t.Errorf("cursor %q: err = %v, want ErrBadCursor", bad, err)
		}
	}
}
