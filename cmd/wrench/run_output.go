package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/wrenchworks/wrench/task"
)

// checkWritable reports whether a file can be written at path, without
// changing what is there: an existing file must be a regular file open for
// writing; a new one must be creatable in its directory (tried with a
// temporary file, removed at once). It runs before a task, so an
// unwritable --out fails in a second, not after the work.
func checkWritable(flagName, path string) error {
	if path == "" {
		return nil
	}
	st, err := os.Stat(path)
	switch {
	case err == nil && !st.Mode().IsRegular():
		return fmt.Errorf("%s %s: not a regular file", flagName, path)
	case err == nil:
		f, err := os.OpenFile(path, os.O_WRONLY, 0)
		if err != nil {
			return fmt.Errorf("%s %s: cannot be written: %w", flagName, path, err)
		}
		return f.Close()
	case !errors.Is(err, os.ErrNotExist):
		return fmt.Errorf("%s %s: %w", flagName, path, err)
	}
	f, err := os.CreateTemp(filepath.Dir(path), ".wrench-check-*")
	if err != nil {
		return fmt.Errorf("%s %s: cannot be created: %w", flagName, path, err)
	}
	f.Close()
	return os.Remove(f.Name())
}

// saveFile writes data to path; when that fails it keeps data in a file of
// its own in the temporary directory and says where, so finished work is
// never lost to an output path that went bad during the run. It returns
// false when path could not be written.
func saveFile(env *cliEnv, what, path, taskID string, data []byte) bool {
	err := os.WriteFile(path, data, 0o644)
	if err == nil {
		return true
	}
	fmt.Fprintf(env.stderr, "wrench run: write %s to %s: %v\n", what, path, err)
	f, terr := os.CreateTemp("", "wrench-"+taskID+"-*"+filepath.Ext(path))
	if terr == nil {
		_, terr = f.Write(data)
		if cerr := f.Close(); terr == nil {
			terr = cerr
		}
	}
	if terr != nil {
		fmt.Fprintf(env.stderr, "wrench run: could not keep the %s anywhere either: %v\n", what, terr)
		return false
	}
	fmt.Fprintf(env.stderr, "wrench run: the %s is saved in %s instead\n", what, f.Name())
	return false
}

// writeRunOutput puts a run's outputs where the flags say: the trajectory
// file, the patch (--out, else stdout unless --json) and the result object
// (--json). It returns false when an output could not go where it was
// asked to (what could be kept is kept elsewhere and named).
func writeRunOutput(env *cliEnv, f runFlags, res task.Result, trajectory []byte) bool {
	ok := true
	if f.trajectory != "" {
		ok = saveFile(env, "trajectory", f.trajectory, res.TaskID, trajectory) && ok
	}
	if f.out != "" {
		ok = saveFile(env, "patch", f.out, res.TaskID, []byte(res.Patch)) && ok
	}
	var err error
	switch {
	case f.jsonOut:
		err = printJSON(env.stdout, res)
	case f.out == "":
		_, err = io.WriteString(env.stdout, res.Patch)
	}
	if err != nil {
		fmt.Fprintf(env.stderr, "wrench run: write to stdout: %v\n", err)
		ok = false
	}
	return ok
}
