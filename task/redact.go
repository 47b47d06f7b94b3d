package task

import (
	"net/url"
	"regexp"
	"strings"
)

// RedactURL returns raw without the credentials a repository URL may carry:
// its user info ("https://user:password@host/…") and the values of query
// parameters that look like secrets (access_token, private_token, key,
// password, sig, …). It works on malformed URLs too, so that an error
// message about one never echoes a password. Other strings come back
// unchanged.
func RedactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return redactUnparsable(raw)
	}
	changed := false
	if u.User != nil {
		u.User = nil
		changed = true
	}
	if u.RawQuery != "" {
		q, err := url.ParseQuery(u.RawQuery)
		if err != nil {
			u.RawQuery = "REDACTED"
			changed = true
		} else {
			for k := range q {
				if secretParam(k) {
					q[k] = []string{"REDACTED"}
					changed = true
				}
			}
			if changed {
				u.RawQuery = q.Encode()
			}
		}
	}
	if !changed {
		return raw
	}
	return u.String()
}

// redactUnparsable cuts the user info and the query out of a string that
// does not parse as a URL.
func redactUnparsable(raw string) string {
	s := raw
	if i := strings.IndexAny(s, "?#"); i >= 0 {
		s = s[:i] + "?REDACTED"
	}
	scheme := strings.Index(s, "://")
	if scheme < 0 {
		return s
	}
	rest := s[scheme+3:]
	authority := rest
	if i := strings.Index(rest, "/"); i >= 0 {
		authority = rest[:i]
	}
	if i := strings.LastIndex(authority, "@"); i >= 0 {
		return s[:scheme+3] + "REDACTED@" + rest[i+1:]
	}
	return s
}

// secretParam reports whether a query parameter's name looks like it
// carries a credential.
func secretParam(name string) bool {
	n := strings.ToLower(name)
	for _, w := range []string{"token", "key", "secret", "password", "passwd", "pass", "sig", "auth", "credential", "session"} {
		if strings.Contains(n, w) {
			return true
		}
	}
	return false
}

// Redacted returns a copy of t whose repository URL carries no credentials:
// the form in which a task is stored in state records, returned by the API
// and logged. Only the work queue's message keeps the URL as submitted,
// for the worker that clones it.
func (t Task) Redacted() Task {
	t.Repo.URL = RedactURL(t.Repo.URL)
	return t
}

// CredentialShapes match credentials by their shape (OpenAI and GitHub
// tokens, AWS access key ids, Slack tokens): they are redacted even when
// nobody listed them as secrets.
var CredentialShapes = regexp.MustCompile(`\b(sk-[A-Za-z0-9_-]{20,}|gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{30,}|AKIA[0-9A-Z]{16}|xox[abprs]-[A-Za-z0-9-]{10,})\b`)

// Redacted is what a redacted secret is replaced with.
const Redacted = "[REDACTED]"

// RedactSecrets returns s with every one of secrets (those of at least
// four bytes) and every credential-shaped token replaced by [Redacted].
func RedactSecrets(s string, secrets []string) string {
	for _, sec := range secrets {
		if len(sec) >= 4 {
			s = strings.ReplaceAll(s, sec, Redacted)
		}
	}
	return CredentialShapes.ReplaceAllString(s, Redacted)
}

// Redact applies [RedactSecrets] to every free-text field of r: reason,
// summary, patch, and the setup and test outputs. It reports whether the
// patch changed (it may then no longer apply where a secret was).
func (r *Result) Redact(secrets []string) (patchChanged bool) {
	red := func(s *string) { *s = RedactSecrets(*s, secrets) }
	red(&r.Reason)
	red(&r.Summary)
	before := r.Patch
	red(&r.Patch)
	if r.Setup != nil {
		red(&r.Setup.Output)
		for i := range r.Setup.Commands {
			red(&r.Setup.Commands[i])
		}
	}
	for _, tr := range []*TestRun{r.TestsBefore, r.TestsAfter} {
		if tr != nil {
			red(&tr.Output)
			red(&tr.Command)
		}
	}
	return r.Patch != before
}
