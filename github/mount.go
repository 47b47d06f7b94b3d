package github

import "net/http"

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
