package api

import (
	"errors"
	"fmt"
	"net/http"
	"path"
	"regexp"
	"strconv"
	"strings"

	"github.com/wrenchworks/wrench/task"
)

// The artifact names workers store (task.Result.Artifacts lists a task's).
const (
	TrajectoryArtifact = "trajectory.jsonl"
	LogArtifact        = "log.txt"
)

// artifactName is what an artifact name may look like: a plain file name,
// so a name can never reach another task's artifacts or a path.
var artifactName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)

// ValidArtifactName reports whether name is a name artifacts may have:
// letters, digits, '.', '_' and '-', starting with a letter or digit, no
// "..", at most 128 bytes.
func ValidArtifactName(name string) bool {
	return artifactName.MatchString(name) && !strings.Contains(name, "..")
}

// artifactTypes maps an artifact's extension to its Content-Type.
var artifactTypes = map[string]string{
	".diff":  "text/x-diff; charset=utf-8",
	".patch": "text/x-diff; charset=utf-8",
	".jsonl": "application/jsonl; charset=utf-8",
	".json":  "application/json",
	".txt":   "text/plain; charset=utf-8",
}

// artifact serves GET /v1/tasks/{id}/artifacts/{name}: one stored artifact
// of a final or paused task (patch.diff, trajectory.jsonl, log.txt, …; a
// paused task's work so far), as a download. A name that is not a plain
// file name answers 400, a task or artifact that does not exist 404
// (naming the task's artifacts), a task running or queued 409.
func (s *Server) artifact(w http.ResponseWriter, r *http.Request) {
	id, name := r.PathValue("id"), r.PathValue("name")
	if !ValidArtifactName(name) {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("%q is not an artifact name (letters, digits, '.', '_', '-')", name),
			[]task.FieldError{{Field: "name", Problem: "is not a plain file name"}})
		return
	}
	st, err := s.cfg.States.Status(r.Context(), id)
	if err != nil {
		s.backendError(w, r, err)
		return
	}
	if !st.State.Final() && st.State != task.StatePaused {
		writeError(w, http.StatusConflict, fmt.Sprintf("task %s is %s: its artifacts are stored when it is final (or paused)", id, st.State), nil)
		return
	}
	var b []byte
	if s.cfg.Artifacts != nil {
		b, err = s.cfg.Artifacts.Get(r.Context(), id, name)
	} else {
		err = task.ErrNotFound
	}
	switch {
	case errors.Is(err, task.ErrNotFound):
		have := "none"
		if st.Result != nil && len(st.Result.Artifacts) > 0 {
			have = strings.Join(st.Result.Artifacts, ", ")
		} else if st.Pause != nil && len(st.Pause.Artifacts) > 0 {
			have = strings.Join(st.Pause.Artifacts, ", ")
		}
		writeError(w, http.StatusNotFound, fmt.Sprintf("task %s has no artifact %q (it has: %s)", id, name, have), nil)
		return
	case err != nil:
		s.backendError(w, r, err)
		return
	}
	ct, ok := artifactTypes[path.Ext(name)]
	if !ok {
		ct = "application/octet-stream"
	}
	w.Header().Set("Content-Type", ct)
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.Header().Set("Content-Disposition", `attachment; filename="`+name+`"`)
	w.Header().Set("X-Content-Type-Options", "nosniff")
	_, _ = w.Write(b)
}
