package workspace

import "github.com/wrenchworks/wrench/agent/editformat"

// diffLines marks which lines of a are deleted and which of b are
// inserted, for the hunks of a unified patch. It is the same line diff the
// agent's write tools report with.
func diffLines(a, b []string) (delA, insB []bool) { return editformat.LineChanges(a, b) }
