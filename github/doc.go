// Package github connects Wrench to GitHub: tasks arrive as webhook
// deliveries, and results go back as a branch, a pull request and an issue
// comment.
//
// # Intake
//
// [Webhook] is the http.Handler for POST /webhooks/github ([Mount]
// registers it). Each delivery's X-Hub-Signature-256 is checked (HMAC-SHA256
// of the raw body with the webhook secret, compared in constant time)
// before anything else is read; a missing or wrong signature answers 401.
// Two events start a task:
//
//   - issues / labeled, when the label added is WebhookConfig.Label
//     ("wrench") and the issue is open. Adding a label needs triage access,
//     so whoever labels vouches for the text.
//   - issue_comment / created, when the comment's first word is
//     WebhookConfig.CommandPrefix ("/wrench"), its author is not a bot, and
//     its author_association is OWNER, MEMBER or COLLABORATOR. The text
//     after the prefix is added to the instruction.
//
// Comments on pull request conversations, edits and every other event are
// ignored (202 with the reason). The task's id is derived from the issue
// and from signed content identifying the action (the comment's id, or the
// labelled issue's updated_at), not from the unsigned X-GitHub-Delivery
// header: a redelivery, or a replay under a forged delivery id, is a
// duplicate the queue drops, while a new label or a new /wrench comment is
// a new task. Its repository is the payload's clone_url at the default
// branch, accepted only when it is https on WebhookConfig.WebURL's host,
// so no delivery can make Wrench clone a local path.
//
// # Publishing
//
// [Publisher] publishes a GitHub task's final result ([Publisher.Publish],
// [Publisher.OnFinal], or around a runner with [Publisher.Wrap]). A
// resolved result with a patch becomes a commit on its base commit, pushed
// (go-git, token as basic auth) to branch wrench/<task id>, a pull request
// into the base branch, and an issue comment linking it; any other result
// becomes an issue comment with the status, reason and truncated patch.
// Publishing is idempotent: an existing pull request for the branch is
// reused and each comment carries a hidden marker, so it is written once.
//
// [Client] is the small REST client both use: bearer token, the
// X-GitHub-Api-Version header, typed errors ([*APIError], matched with
// errors.Is against [ErrNotFound], [ErrValidation], [ErrRateLimited], …),
// and retries on 5xx and rate limits that honour Retry-After.
//
// The token never appears in a log line, an error, a commit, a comment or
// a task: tasks carry no credentials, and the worker's clone gets the
// token separately (workspace.Auth).
package github
