package workspace

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/url"
	"path/filepath"
	"strings"

	"github.com/wrenchworks/wrench/task"
)

// sourceKind says how a repository is reached.
type sourceKind int

const (
	// kindHTTPS is a remote reached with go-git's smart HTTP transport.
	kindHTTPS sourceKind = iota
	// kindLocal is a repository on this host (a path or a file:// URL),
	// read directly from its object directory.
	kindLocal
)

// source is a parsed task repository URL.
type source struct {
	kind sourceKind
	// fetchURL is what go-git is given (https only).
	fetchURL string
	// display is the URL without credentials: for logs, errors and the
	// workspace's origin remote.
	display string
	// path is the absolute path of a local repository.
	path string
	// mirrorKey is the mirror's directory under Config.MirrorDir: one per
	// host and repository path.
	mirrorKey string
	// host is an https source's host (lower case, with its port if any).
	host string
	// user holds the credentials embedded in the URL: they are sent to this
	// URL's host only, as basic auth, and are never part of fetchURL.
	user *url.Userinfo
	// secrets are the credential values in the URL (password, secret query
	// values), scrubbed from every error message.
	secrets []string
}

// parseSource classifies a task's repository URL: https://, file:// or a
// local path. Credentials embedded in an https URL are kept apart for
// fetching from that host, and appear neither in fetchURL nor in display.
func parseSource(raw string, allowLocal bool) (source, error) {
	raw = strings.TrimSpace(raw)
	if raw == "" {
		return source{}, fmt.Errorf("%w: empty URL", ErrUnsupportedURL)
	}
	lower := strings.ToLower(raw)
	switch {
	case strings.HasPrefix(lower, "https://"):
		u, err := url.Parse(raw)
		if err != nil || u.Host == "" {
			return source{display: redact(raw)}, fmt.Errorf("%w: %s", ErrUnsupportedURL, redact(raw))
		}
		src := source{kind: kindHTTPS, user: u.User, host: strings.ToLower(u.Host), secrets: urlSecrets(u)}
		fetch := *u
		fetch.User, fetch.Fragment = nil, ""
		src.fetchURL = fetch.String()
		clean := fetch
		clean.RawQuery = ""
		src.display = clean.String()
		p := strings.TrimSuffix(strings.TrimSuffix(u.Path, "/"), ".git")
		src.mirrorKey = mirrorKey(src.host, p, src.host+p)
		return src, nil
	case strings.HasPrefix(lower, "file://"):
		u, err := url.Parse(raw)
		if err != nil || (u.Host != "" && u.Host != "localhost") || !filepath.IsAbs(u.Path) {
			return source{display: raw}, fmt.Errorf("%w: %s (want file:///absolute/path)", ErrUnsupportedURL, raw)
		}
		return localSource(u.Path, raw, allowLocal)
	case strings.Contains(raw, "://"), strings.HasPrefix(raw, "git@"):
		return source{display: redact(raw)}, fmt.Errorf("%w: %s (https://, file:// or a local path)", ErrUnsupportedURL, redact(raw))
	default:
		abs, err := filepath.Abs(raw)
		if err != nil {
			return source{display: raw}, fmt.Errorf("%w: %s: %w", ErrUnsupportedURL, raw, err)
		}
		return localSource(abs, abs, allowLocal)
	}
}

func localSource(path, display string, allowLocal bool) (source, error) {
	path = filepath.Clean(path)
	if !allowLocal {
		return source{display: display}, fmt.Errorf("%w: local repositories are disabled: %s", ErrUnsupportedURL, display)
	}
	return source{
		kind:      kindLocal,
		display:   display,
		path:      path,
		mirrorKey: mirrorKey("local", strings.TrimSuffix(path, ".git"), "file://"+path),
	}, nil
}

// mirrorKey builds "<host>/<path segments>-<hash>": readable, free of ".."
// and special characters, and unique per normalized URL.
func mirrorKey(host, path, full string) string {
	var segs []string
	for _, s := range strings.Split(path, "/") {
		if s == "" {
			continue
		}
		segs = append(segs, sanitizeName(s))
	}
	sum := sha256.Sum256([]byte(full))
	last := "repo"
	if len(segs) > 0 {
		last = segs[len(segs)-1]
		segs = segs[:len(segs)-1]
	}
	segs = append(segs, last+"-"+hex.EncodeToString(sum[:4]))
	return filepath.Join(append([]string{sanitizeName(host)}, segs...)...)
}

// sanitizeName keeps [A-Za-z0-9._-], maps everything else to '_', and never
// returns "", "." or "..".
func sanitizeName(s string) string {
	b := []byte(s)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			b[i] = '_'
		}
	}
	out := string(b)
	if len(out) > 64 {
		out = out[:64]
	}
	if out == "" || strings.Trim(out, ".") == "" {
		out = "_" + out
	}
	return out
}

// redact removes credentials from a URL-looking string.
func redact(raw string) string { return task.RedactURL(raw) }

// urlSecrets lists the credential values u carries: its password (or a
// user name alone, which is often a token) and secret-looking query values.
func urlSecrets(u *url.URL) []string {
	var out []string
	if u.User != nil {
		if pw, ok := u.User.Password(); ok && pw != "" {
			out = append(out, pw)
		} else if name := u.User.Username(); name != "" {
			out = append(out, name)
		}
	}
	redacted, _ := url.Parse(task.RedactURL(u.String()))
	if redacted == nil {
		return out
	}
	kept := redacted.Query()
	for k, vs := range u.Query() {
		if kept.Get(k) == "REDACTED" {
			for _, v := range vs {
				if v != "" {
					out = append(out, v)
				}
			}
		}
	}
	return out
}

// scrub replaces each secret in s.
func scrub(s string, secrets []string) string {
	for _, v := range secrets {
		if len(v) >= 3 {
			s = strings.ReplaceAll(s, v, "REDACTED")
		}
	}
	return s
}
