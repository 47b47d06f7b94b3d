// Package workspace clones a task's repository with go-git into a
// directory the sandbox mounts at /workspace, and keeps checkpoints of it:
// it implements sandbox.Checkpointer (Checkpoint, Rollback, Diff).
//
// # Layout
//
// A [Manager] owns Config.Root. Each [Workspace] is one directory there:
//
//	<Root>/<task>-<random>/wrench.json   labels (deployment, task, created, owner pid and host)
//	                      /repo/         the working tree and its .git: Dir(), mounted in the sandbox
//	                      /state/        private bare repository: base objects and checkpoints
//
// Checkpoints are commits on refs/wrench/checkpoints in the private state
// repository, which the sandbox cannot reach: commands run in the sandbox
// (git included) can neither see nor corrupt them, and no branch, HEAD or
// index of the user's repository is ever moved. The working tree's .git is
// an ordinary clone (full history from a mirror, one commit deep from a
// direct https fetch) with no alternates pointing outside it, so git works
// inside the sandbox; its index is written once, at Open.
//
// # Sources
//
// https:// remotes use go-git's smart HTTP transport; a token is sent as
// basic auth (x-access-token) and never written to disk or logged. Local
// paths and file:// URLs are read directly from the repository's object
// directory (packs copied, loose objects packed, alternates followed), so
// no git binary is needed. ssh and plain http are refused.
//
// With Config.MirrorDir set, every repository has a bare mirror per host
// and path (all branches and tags), fetched only when it lacks the wanted
// commit (https refs are always listed first, which also checks the
// token), plus a cache of recently checked-out trees (their files
// concatenated into blob files with a manifest), from which a workspace is
// written with copy_file_range. A mirror is locked with flock, so
// concurrent Opens in one or several processes take turns updating it and
// share it while copying. Mirror packs reach a workspace's .git by hard
// link only when the sandbox user (Config.Owner) does not own them and
// they are read-only; otherwise they are copied. Mirrors are never pruned:
// remove a mirror directory to reclaim space or recover from corruption.
// Without mirrors, an https clone fetches one commit deep (by ref, or by
// sha when the server allows it; otherwise everything).
//
// # What a snapshot records
//
// Checkpoint, Rollback and Diff all start from a snapshot of the working
// tree, so changes made by shell commands count as much as edits made by
// tools. A snapshot records every regular file (content and executable
// bit), symlink (as a link: its target is never read), and directory
// (empty ones as empty trees, so Rollback restores them; git patches
// cannot express them, so Diff leaves them out). It skips ".git" at any
// depth, special files, and paths matched by the tree's .gitignore files
// unless the base commit tracks them; Rollback leaves ignored files alone
// unless the checkpoint records something at their path. Submodule
// entries are carried over from the base commit unchanged. A stat cache
// (size, mtime, ctime, inode, mode) avoids re-reading unchanged files;
// files modified within 50 ms of being hashed are always re-read.
//
// # Diffs
//
// Diff renders base..working tree as a git patch that `git apply` accepts:
// full-index "index" lines, new/deleted file modes, old/new mode, renames
// (exact, then at least 50% similar, as in git), symlinks, "\ No newline
// at end of file", C-quoted unusual paths, and binary files as GIT binary
// patch literals (forward and reverse). Text hunks come from Myers' diff
// with three lines of context; .gitattributes is not consulted.
//
// # Symlink safety
//
// Host-side code never follows a symlink out of a workspace: snapshots,
// rollbacks and ownership changes go through os.Root (per directory, one
// path component at a time, O_NOFOLLOW, Lchown, rename over links rather
// than writing through them), and the checkout writes each file with
// openat(O_CREAT|O_EXCL|O_NOFOLLOW) on a directory descriptor obtained
// through the os.Root. go-git's storages use go-billy's bound OS
// filesystem. Close and Remove delete through an os.Root as well.
//
// # Ownership and reaping
//
// With Config.Owner set, every path in the working tree (and its .git,
// except shared read-only packs) belongs to that user after Open and after
// every Rollback. [Manager.List] and [Manager.Remove] let the reaper find
// and delete workspaces that belong to no running task of the deployment.
package workspace
