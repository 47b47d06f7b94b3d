package main

import (
	"context"
	"flag"
	"fmt"
	"path/filepath"

	"github.com/wrenchworks/wrench/api"
	"github.com/wrenchworks/wrench/dispatcher"
	"github.com/wrenchworks/wrench/github"
	"github.com/wrenchworks/wrench/task"
)

// githubFlags connect the service to GitHub: the token the publisher pushes
// branches and opens pull requests with, and the API it talks to.
type githubFlags struct {
	token  string
	apiURL string
}

func (g *githubFlags) register(fs *flag.FlagSet, env *cliEnv) {
	fs.StringVar(&g.token, "github-token", env.getenv("GITHUB_TOKEN"), "token for publishing GitHub tasks' results as pull requests (default $GITHUB_TOKEN; none: not published)")
	fs.StringVar(&g.apiURL, "github-api", github.DefaultAPIURL, "GitHub REST API base URL (GitHub Enterprise: https://HOST/api/v3)")
}

// wrap makes runner publish the results of GitHub tasks (branch, pull
// request, issue comment) when a token is configured.
func (g githubFlags) wrap(runner dispatcher.Runner, common commonFlags, env *cliEnv) (dispatcher.Runner, error) {
	if g.token == "" || runner == nil {
		return runner, nil
	}
	dataDir, err := common.resolvedDataDir()
	if err != nil {
		return nil, err
	}
	pub, err := github.NewPublisher(github.PublisherConfig{
		Token:    g.token,
		APIURL:   g.apiURL,
		WebURL:   github.WebURLFor(g.apiURL),
		CacheDir: filepath.Join(dataDir, "github"),
		Logger:   common.logger(env).With("component", "github"),
	})
	if err != nil {
		return nil, fmt.Errorf("github publisher: %w", err)
	}
	return pub.Wrap(runner), nil
}

// mountWebhook serves POST /webhooks/github on srv when a secret is set;
// tasks it accepts are submitted through backend.
func (g githubFlags) mountWebhook(srv *api.Server, secret string, backend countingBackend, env *cliEnv, common commonFlags) error {
	if secret == "" {
		return nil
	}
	_, err := github.Mount(srv, github.WebhookConfig{
		Secret: []byte(secret),
		Submit: backend.Submit,
		WebURL: github.WebURLFor(g.apiURL),
		Logger: common.logger(env).With("component", "github"),
	})
	return err
}

// apiBackend is what the HTTP API submits through: GitHub tasks come only
// from the signed webhook, never from an API client, so that an API token
// cannot make Wrench push to or comment on a repository.
type apiBackend struct{ countingBackend }

func (b apiBackend) Submit(ctx context.Context, t task.Task) (task.Status, bool, error) {
	if t.Source.Kind == "github" {
		return task.Status{}, false, &task.ValidationError{Fields: []task.FieldError{{
			Field: "source.kind", Problem: `"github" is reserved for tasks from the GitHub webhook`}}}
	}
	return b.countingBackend.Submit(ctx, t)
}
