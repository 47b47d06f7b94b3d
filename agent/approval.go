package agent

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"strings"
)

// ApprovalMode says who approves tool calls that change something: nobody
// (yolo) or a person (confirm).
type ApprovalMode string

// The approval modes. A person can also play the model itself: see
// HumanModel.
const (
	// ApproveYolo runs every call without asking (the default, and the
	// service's mode: nobody is there to ask).
	ApproveYolo ApprovalMode = "yolo"
	// ApproveConfirm asks Run.Approve before every command (bash, and the
	// text protocol's commands) and every write (edit, write, patch,
	// search_replace), showing the command or the diff.
	ApproveConfirm ApprovalMode = "confirm"
)

// ApprovalRequest is one call waiting for a person's decision.
type ApprovalRequest struct {
	Call ToolCall
	// Command is the shell command, for bash.
	Command string
	// Paths are the files a write would change and Diff its unified diff,
	// for the write tools.
	Paths []string
	Diff  string
}

// Approver decides whether a call may run. False refuses it: nothing runs,
// the model is told, and the run ends with permission_denied. An error
// counts as a refusal and is kept in Outcome.Err. It is called from the
// run's goroutine and should honour ctx.
type Approver func(ctx context.Context, req ApprovalRequest) (bool, error)

// deniedOutput is what the model sees for a refused call.
const deniedOutput = "Permission denied: the user did not approve this %s call, so nothing was run or changed. The run ends here; the user may continue it with instructions."

// approve asks Run.Approve in confirm mode; it returns nil when the call may
// go ahead, and otherwise the result that refuses it.
func (s *runState) approve(ctx context.Context, req ApprovalRequest) *toolResult {
	if s.r.Approval != ApproveConfirm {
		return nil
	}
	ok, err := s.r.Approve(ctx, req)
	if ctx.Err() != nil {
		return &toolResult{fatal: ctx.Err(), output: "Error: interrupted", isError: true}
	}
	decision := "approved"
	if !ok || err != nil {
		decision = "denied"
	}
	s.traj.write(Record{Kind: RecordApproval, Turn: s.turn, Call: &req.Call, Note: decision})
	s.logEvent("%s call %s", req.Call.Name, decision)
	if ok && err == nil {
		return nil
	}
	if err != nil {
		err = fmt.Errorf("approve %s: %w", req.Call.Name, err)
	}
	return &toolResult{output: fmt.Sprintf(deniedOutput, req.Call.Name), isError: true, denied: true, deniedErr: err}
}

// validApproval checks a run's approval settings.
func validApproval(r *Run) error {
	switch r.Approval {
	case "", ApproveYolo:
	case ApproveConfirm:
		if r.Approve == nil {
			return fmt.Errorf("%w: approval mode confirm needs an Approve function", ErrInvalidRun)
		}
	default:
		return fmt.Errorf("%w: approval mode %q is not one of yolo, confirm", ErrInvalidRun, r.Approval)
	}
	return nil
}

// PromptApprover returns an Approver for a terminal: it prints the command
// or the diff to out and reads the answer from in; "y" or "yes" approves,
// anything else (end of input included) refuses. A read in progress is not
// interrupted by ctx: it ends with the next line or the end of in.
func PromptApprover(in io.Reader, out io.Writer) Approver {
	br := bufio.NewReader(in)
	return func(ctx context.Context, req ApprovalRequest) (bool, error) {
		if err := ctx.Err(); err != nil {
			return false, err
		}
		switch {
		case req.Command != "":
			fmt.Fprintf(out, "\nThe agent wants to run:\n  %s\n", req.Command)
		default:
			fmt.Fprintf(out, "\nThe agent wants to change %s:\n%s\n", strings.Join(req.Paths, ", "), strings.TrimRight(req.Diff, "\n"))
		}
		fmt.Fprint(out, "Allow? [y/N] ")
		line, err := br.ReadString('\n')
		if err != nil && line == "" {
			fmt.Fprintln(out)
			return false, nil
		}
		switch strings.ToLower(strings.TrimSpace(line)) {
		case "y", "yes":
			return true, nil
		}
		return false, nil
	}
}
