package shim

import (
	"errors"
	"testing"

	"github.com/wrenchworks/wrench/sandbox"
)

// TestPartialNoteIsAPartialPatch: the note the helper sends with a patch
// that leaves out files too large to include reaches the worker as
// sandbox.ErrPartialPatch (the patch is kept), unlike any other Diff
// error (no patch: the worker does not call the task resolved).
func TestPartialNoteIsAPartialPatch(t *testing.T) {
	note := partialNote("the patch leaves out 1 file(s) over 32 MB, changed but too large to include: big.bin")
	if !errors.Is(note, sandbox.ErrPartialPatch) || note.Error() != string(note) {
		t.Errorf("partial note %q does not match ErrPartialPatch", note)
	}
	if errors.Is(errors.New("diff: no space left on device"), sandbox.ErrPartialPatch) {
		t.Error("any error matches ErrPartialPatch")
	}
}
