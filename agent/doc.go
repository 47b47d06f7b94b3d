// Package agent owns the coding-agent loop: the conversation with a model,
// the tools that act on a workspace, prompts, recovery from errors, loop
// detection, verification with checkpoints and rollback, and compaction.
//
// It sees the outside world only through interfaces: Model (chat with
// tools), defined here, and the sandbox vocabulary's sandbox.Env (exec,
// files and search inside the workspace) and sandbox.Checkpointer (save and
// restore the tree). It never imports Docker, NATS or an LLM SDK. One Agent value serves many concurrent runs: all per-run
// state (history, limits, permission mode, cancellation through ctx) is
// passed in a Run and lives on the goroutine that calls Agent.Run.
//
// # The loop
//
// Before every model call the limits are checked (turns, cost, tokens, wall
// clock, consecutive format errors) and the history is compacted if it
// nears the context window. The reply's text and thinking become events;
// its tool calls run in order and every call gets exactly one result
// message, in the same order, even when the run stops half-way ("Not run:
// interrupted."). A malformed call (arguments that are not a JSON object,
// an unknown or unavailable tool, a missing required field, a field of the
// wrong type) becomes an error result and the loop goes on; replies with
// malformed calls count as format errors, and MaxFormatErrors in a row end
// the run. A reply without tool calls ends the run (end_turn) unless it
// was cut off (finish reason length), empty, or announces an action it did
// not take (a colon or ellipsis at the end, "let me …", "I'll …"): those
// get a nudge — the last kind at most twice in a row.
//
// A reply without tool calls that holds <file-edit filePath="..."> blocks
// (SEARCH/REPLACE edits written into the text, agent/fileedit.go) has them
// run as search_replace calls instead.
//
// Every ending is an Outcome with a typed StopReason; the partial work stays
// in the workspace, whose owner takes its diff (the worker does, once, after
// its own verification).
// Cancelling ctx stops the model request and the running command (both get
// ctx) and Run returns; Model and Env implementations must honour ctx. Run
// starts no goroutines. A Model may report its Capabilities: one without
// tool calling gets the text protocol, and its context window sizes
// compaction.
//
// # Permissions and modes
//
// Run.Approval is yolo (the default: nothing asks) or confirm: Run.Approve
// sees every command and every write, with its diff, before it happens; a
// refusal is told to the model, the rest of the reply is not run, and the
// run ends with permission_denied. PromptApprover asks on a terminal;
// HumanModel is the human mode (a person types the commands). Plan
// mode offers only the read-only tools; Run.PlanFirst starts in plan mode
// and switches to every tool once the model's finish has recorded a plan
// (Outcome.Plan).
//
// # Tools
//
// view, ls, glob, grep, bash, edit, write, patch, search_replace and finish.
// Their names and JSON arguments are a stable contract (scripts, prompts and
// recorded trajectories use them). Each tool is a small type bound to one
// run with exactly what it needs — one side of the sandbox.Env, the read
// tracker, the approver — so it can be built and tested alone; the loop
// holds the conversation and the limits, and records the files a call
// wrote (toolResult.writes) in the file history. Paths are relative
// to /workspace; absolute paths under it are accepted, anything else is
// refused. view records a SHA-256 of the file; edit, write, patch and
// search_replace refuse an existing file that was not viewed or whose
// content changed since (a command, a rollback, another process), and
// accept files they wrote themselves. Every write returns a unified diff
// with added/removed counts, and Outcome.FileHistory keeps each version
// before and after each write. bash output, and any long tool output, keeps
// its head and tail (Config.MaxOutputChars, default 10,000) with a notice
// advising a narrower command. Plan mode offers only view, ls, glob, grep
// and finish; Run.AllowedTools narrows the set further (finish stays).
// Two tools are optional, offered when the Config enables them or the
// allowlist names them: research (Config.SubAgents) hands a question to a
// read-only sub-run with a fresh context and returns its findings, its
// usage counted in the run's; search (Config.CodeSearch) ranks files by
// the distinct query terms they contain, rarer terms weighing more.
//
// After a write, a per-extension checker runs in the sandbox
// (Config.Diagnostics; by default gofmt -e for Go and Python's ast parser,
// syntax only) and its complaints are appended to the write's result. Tool
// results have two contents: the model's (with recovery and verification
// notes) and a shorter one for people, which tool_result events and the
// trajectory's display field carry.
//
// # Recovery
//
// A failed command is reported verbatim with its exit code and a class
// (missing_dependency, syntax, assertion, permission, timeout, unknown).
// Error signatures are normalised (line numbers, addresses, temp paths,
// durations) and counted: the second occurrence gets a note, the third and
// later a "try a completely different approach" nudge. Failures after the
// model changed something count against an attempt budget
// (RecoveryConfig.AttemptBudget, a repeat weighing double); exhausting it
// injects a change-of-strategy nudge and starts the count again; a passing
// verification, or success of a command that failed before, resets it.
// Loop detection is deterministic and outside the model: the same tool,
// arguments (compared as JSON) and result LoopRepeats times within the last
// LoopWindow calls earns a nudge; counting again from the nudged call,
// LoopRepeats more (that is, LoopRepeats-1 after it) end the run with
// loop_detected. Durations, addresses and temp paths in results are masked,
// so a re-run that only differs in its timing is still the same result.
//
// # Verification, checkpoints and rollback
//
// The task's test command runs through Env.Exec, in the sandbox: with
// VerifyOnFinish (the default) when the model calls finish, with
// VerifyAfterWrite also after every successful write tool call; never in
// plan mode, without a test command, or with VerifyNever. A pass makes a
// checkpoint (Workspace.Checkpoint), which becomes the rollback target.
// A failure is a regression when the last good state passed, or when it
// names failing tests (go test, pytest, unittest, TAP, jest, compile errors
// by file) that the last good state did not; a regression is rolled back
// to the last good checkpoint (the base checkpoint at first: Run.BaseCheckpoint
// or one taken at the start) and the model is told what was rolled back
// and why. A failure that is not a regression is only reported. Run.Baseline
// (the worker's test run before any change) is the first reference; without
// it no failure before the first pass counts as a regression.
//
// finish with failing tests is refused — the model sees the test output and
// may continue — at most Config.MaxFinishRejections times (default 2); the
// next finish ends the run with finished_unverified. A finish whose
// verification rolled something back is refused the same way, so the model
// decides whether the restored tree is what it wants. The tests are not run
// again when nothing could have changed since the last run (no write, no
// command). Outcome.LastTestRun is the latest verification result for the
// tree as it is: after a rollback, the restored checkpoint's result; nil
// when no verification ran. The worker still runs its own final
// verification; the agent's is what steers the model.
//
// # Context
//
// When the estimated history (the last reported input tokens plus about a
// token per four characters added since) reaches CompactionConfig.Threshold
// (default 0.8) of the model's window (Config.ContextWindows, default
// 128,000), tool outputs older than the last KeepTurns turns are elided;
// if that is not enough, those turns are summarised by a model call into
// one summary message, keeping the system prompt, the task and the recent
// turns. Summaries are limited to MaxPerRun attempts per run, at least
// MinTurnsBetween turns apart, failed attempts included; a history that
// still exceeds the window ends the run with context_window.
//
// Prompts are text/template with missingkey=error. The system message has
// layers: system (role, rules and a SEARCH/REPLACE example) or text_system,
// project (the repository's AGENTS.md and .wrench/instructions.md),
// environment (workspace, git state, platform, date, test command) and
// append (the operator's). The first user message is instance: the task,
// the files and directories it @-mentions (a file shown whole counts as
// viewed), and the recommended workflow. Each template can be overridden by
// a file (LoadPromptSet). A continued History that holds a summary message
// restarts from the latest one.
//
// # Save points
//
// Run.OnSave is given a SavePoint (the conversation, turn count, usage and
// the files the model has read) at the end of every turn that made a
// verified checkpoint and of every SaveEvery-th turn; the caller keeps it
// with the workspace's tree. Run.Resume continues one on a restored tree,
// from its turn, and Run.Spent carries earlier attempts' model use into the
// run's usage and limits (agent/resume.go).
//
// # Text protocol
//
// For models without tool calling (Run.Protocol task.ProtocolText): each
// reply must hold exactly one ```bash block (mini-swe-agent's v1 rule);
// the command runs like the bash tool and the observation is sent back as
// <returncode>/<output> (head and tail with a warning past MaxOutputChars),
// plus an <error_class> line on failure. Anything else is a format error
// ("found N actions"), fed back and counted. A command whose output starts
// with COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT and exits 0 submits: the rest
// of its output is the Outcome's Summary, after the same verification as
// finish.
//
// # Limits and costs
//
// Limits: MaxTurns N stops after N turns; -1 and 0 both run until
// HardTurnCap — 0 is the zero value and must be usable, so it does not
// disable the model. Cost is priced per call from Config.Prices, whose
// source is the operator's price table (llm.DefaultPrices with the
// `--prices` file over it); a model it does not list costs 0 and is logged
// once. The agent's own defaults come from package task, where every
// task-level default lives: HardTurnCap task.MaxTurnsHardCap, a test run
// bounded by task.DefaultTestTimeout; then MaxFormatErrors 3 and no cost,
// token or wall-clock limit (the worker passes the task's effective limits,
// resolved by the policy). When a limit is reached,
// Run.OnLimit decides: true grants another allowance of the original size.
//
// # Trajectory and replay
//
// Run.Trajectory receives JSONL Records (run start, every message, tool
// call, raw tool result with its duration, usage with cost and duration,
// verification, compaction, limit, outcome) with Run.Secrets and
// credential-shaped tokens redacted. ReadTrajectory parses one; Replay
// re-executes its tool calls against a fresh Env and reports where the
// observations diverge.
package agent
