// Package editformat implements the file-edit formats the agent's write tools
// accept, as pure functions on bytes: no I/O, no globals, standard library
// only. Every function is safe for concurrent use.
//
// Three formats, one per tool:
//
//   - [Replace] for the edit tool: old_string must occur exactly once, or a
//     [*MatchError] says how many times (and on which lines) it occurs.
//   - [ParsePatch] / [ApplyPatch] for the patch tool: the Codex apply_patch
//     format (*** Begin Patch ... *** End Patch).
//   - [ParseSearchReplace] / [ApplySearchReplace] for the search_replace tool:
//     Cline's ------- SEARCH / ======= / +++++++ REPLACE blocks, also the
//     legacy <<<<<<< SEARCH / >>>>>>> REPLACE markers and aider's edit blocks.
//
// Diffs of the results are rendered by package diff.
//
// # apply_patch: decisions
//
// The Codex fixtures (conformance/codex-apply-patch) pass, with three
// deliberate divergences, listed in the conformance README: Wrench's patch is
// all-or-nothing and never overwrites a file it was not told to update.
// With [PatchOptions].Codex set the three behave as Codex does, and all 23
// fixtures produce Codex's expected trees; the patch tool does not set it.
//
//   - Add File onto an existing path is refused (Codex overwrites: 011).
//   - Update File with Move to onto an existing path is refused (010).
//   - A failure in a later operation leaves nothing applied (015): ApplyPatch
//     computes every change first and returns no [Change] at all on error.
//
// Context lines are located as Codex does: exact first, then ignoring trailing
// whitespace, then ignoring leading and trailing whitespace, then after
// mapping typographic dashes, quotes and spaces to ASCII. The pass that
// matched is reported as [Change].Fuzz ([FuzzExact] .. [FuzzPunctuation]) and
// a match above [PatchOptions].MaxFuzz is refused with [ErrTooFuzzy]. After
// a loose match the context lines keep the file's text (Codex writes the
// patch's version of them); the - and + lines are applied as written.
//
// Other choices, none of which a Codex fixture covers:
//
//   - An updated file always ends with a newline, as in Codex (fixture 014).
//   - A file whose line breaks are all CRLF keeps CRLF: patch lines are
//     matched without the CR and written back with it.
//   - A chunk with only + lines is inserted right after its @@ header line
//     when it has one; with a bare @@ it is appended at the end of the file
//     (Codex appends at the end in both cases).
//   - Several consecutive @@ header lines narrow the position step by step
//     (class, then method); they are kept in [Chunk].Context joined by "\n".
//   - Accepted leniencies: whitespace around every marker line, a heredoc
//     (<<'EOF' ... EOF) or a ``` fence around the whole patch, CRLF patch text,
//     and blank lines between the + lines of an Add File.
//
// # SEARCH/REPLACE: decisions
//
// Wrench follows Cline, as the conformance README requires: blocks apply in
// order, each SEARCH is looked for from the end of the previous block's match
// in the original, the first occurrence wins, and there is no ambiguity error
// (so every case in search-replace.json passes as written; aider's
// "first occurrence only" tests agree). All matching is against the original
// text; the replacements are put together at the end. For each block the
// matchers are tried in this order, strictest first:
//
//  1. exact: the SEARCH text as a substring (Cline);
//  2. leading_whitespace: whole lines equal except for one uniform indent
//     offset, which is then added to the REPLACE lines (aider) — unless
//     REPLACE is already indented like the matched file lines and SEARCH is
//     not, when REPLACE is kept as written (a SEARCH copied without its
//     indentation must not indent a correct REPLACE twice);
//  3. the same two again with a spurious leading blank SEARCH line dropped,
//     for SEARCH texts of three lines or more (aider);
//  4. line_trimmed: whole lines equal after trimming, REPLACE kept as written
//     (Cline);
//  5. block_anchor: three lines or more whose first and last lines match
//     trimmed (Cline);
//  6. out_of_order: exact, searched from the start of the file (Cline), as
//     long as it does not overlap a span another block already replaced.
//
// An empty SEARCH replaces the whole file (or creates it); it must then be the
// only block. A block whose markers are broken is "malformed" rather than
// silently skipped: a ======= or REPLACE marker with no SEARCH before it, a
// REPLACE marker before the =======, a new SEARCH before the previous block's
// REPLACE marker. A last block opened with ------- SEARCH may lack its
// REPLACE marker (Cline applies it); one opened with <<<<<<< SEARCH may not
// (aider). A ======= with trailing text is a separator only in a <<<<<<<
// block (aider), not in a ------- block (Cline).
package editformat
