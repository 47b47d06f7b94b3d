// Package diff owns Wrench's line diff and its rendering as unified and git
// diffs: one implementation for the agent's tool results
// (agent/editformat, agent/memenv) and the workspace's patches
// (workspace). It is pure, standard library only, with no I/O and no
// globals; every function is safe for concurrent use.
//
//   - [Lines] and [Script] compare two sequences of lines (Myers'
//     linear-space algorithm, with a work budget past which a region is
//     shown as replaced whole: still correct, not minimal).
//   - [Unified] renders one file's change with "--- a/" and "+++ b/"
//     headers; [WriteHunks] writes only the hunks, for callers that write
//     their own headers (a git diff's extended header lines).
//   - [QuotePath], [IsBinary] and [WriteBinary] are the pieces of git's
//     patch format that `git apply` needs beyond the hunks.
//
// Hunks have 3 lines of context, and changes at most 6 unchanged lines
// apart share a hunk, as in git. A missing final newline is marked
// "\ No newline at end of file".
package diff
