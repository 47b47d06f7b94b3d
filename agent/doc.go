// Package agent owns the coding-agent loop: the conversation with a model,
// the tools that act on a workspace, prompts, recovery from errors, loop
// detection, verification with checkpoints and rollback, and compaction.
//
// It sees the outside world only through interfaces it defines here — Model
// (chat with tools), Env (exec and files inside the workspace) and
// Checkpointer (save and restore the tree) — and never imports Docker, NATS
// or an LLM SDK. One Agent value serves many concurrent runs: all per-run
// state is passed in a Run.
package agent
