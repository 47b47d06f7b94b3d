package agent

import (
	"context"
	"fmt"
	"io/fs"
	"strings"
	"testing"

	"github.com/wrenchworks/wrench/sandbox"
)

// A symbolic link out of the workspace is reported as such, not as
// "permission denied" (the hostile review's symlink escapes read as a
// permission problem).
func TestEnvFailureNamesAnEscape(t *testing.T) {
	err := fmt.Errorf("read secret: %w: %w", sandbox.ErrEscape, &fs.PathError{Op: "openat", Path: "secret", Err: fs.ErrPermission})
	r := envFailure(context.Background(), "view secret", err)
	if !r.isError || !strings.Contains(r.output, "outside /workspace") || strings.Contains(r.output, "permission denied") {
		t.Errorf("output %q", r.output)
	}
}
