package github

import (
	"net/http"
	"net/url"
	"strings"
)

// WebhookPattern is the route [Mount] registers: the webhook's URL path on
// Wrench's HTTP server is /webhooks/github.
const WebhookPattern = "POST /webhooks/github"

// Mux is what [Mount] mounts the webhook on; *api.Server and
// *http.ServeMux have this method.
type Mux interface {
	Handle(pattern string, h http.Handler)
}

// Mount builds the webhook from cfg and registers it on mux at
// [WebhookPattern], outside any bearer-token check: the webhook
// authenticates each delivery by its signature.
func Mount(mux Mux, cfg WebhookConfig) (*Webhook, error) {
	w, err := NewWebhook(cfg)
	if err != nil {
		return nil, err
	}
	mux.Handle(WebhookPattern, w)
	return w, nil
}

// WebURLFor returns the web root that goes with a REST API root: GitHub's
// "https://api.github.com" (or "") gives "https://github.com", and a
// GitHub Enterprise Server's "https://host/api/v3" gives "https://host".
// Other URLs are returned with any trailing "/api/v3" removed.
func WebURLFor(apiURL string) string {
	u := strings.TrimSuffix(strings.TrimSpace(apiURL), "/")
	switch {
	case u == "", strings.EqualFold(u, DefaultAPIURL):
		return DefaultWebURL
	case strings.HasSuffix(strings.ToLower(u), "/api/v3"):
		return u[:len(u)-len("/api/v3")]
	}
	return u
}

// RepoOf returns the owner and name of a repository URL on the GitHub web
// root web ("https://github.com/acme/calc.git" gives acme, calc); ok is
// false for another host or a URL that is not a repository's.
func RepoOf(web, repoURL string) (owner, repo string, ok bool) {
	w, err := url.Parse(strings.TrimSuffix(web, "/"))
	if err != nil {
		return "", "", false
	}
	u, err := url.Parse(repoURL)
	if err != nil || u.Scheme != w.Scheme || !strings.EqualFold(u.Host, w.Host) {
		return "", "", false
	}
	rest, ok := strings.CutPrefix(u.Path, w.Path+"/")
	if !ok {
		return "", "", false
	}
	owner, repo, ok = strings.Cut(strings.TrimSuffix(strings.TrimSuffix(rest, "/"), ".git"), "/")
	if !ok || owner == "" || repo == "" || strings.Contains(repo, "/") {
		return "", "", false
	}
	return owner, repo, true
}
