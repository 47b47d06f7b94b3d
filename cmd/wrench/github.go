package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/wrenchworks/wrench/api"
	"github.com/wrenchworks/wrench/dispatcher"
	"github.com/wrenchworks/wrench/github"
	"github.com/wrenchworks/wrench/policy"
	"github.com/wrenchworks/wrench/queue"
	"github.com/wrenchworks/wrench/task"
	"github.com/wrenchworks/wrench/workspace"
)

// githubFlags connect the service to GitHub: who Wrench is there (a GitHub
// App, or a personal token), the API it talks to, and the CA it trusts.
type githubFlags struct {
	token   string
	apiURL  string
	appID   string
	appKey  string
	caFile  string
	refresh time.Duration
}

func (g *githubFlags) register(fs *flag.FlagSet, env *cliEnv) {
	fs.StringVar(&g.token, "github-token", env.getenv("GITHUB_TOKEN"), "personal access token for publishing GitHub tasks' results as pull requests (default $GITHUB_TOKEN; none and no App: not published)")
	fs.StringVar(&g.apiURL, "github-api", github.DefaultAPIURL, "GitHub REST API base URL (GitHub Enterprise: https://HOST/api/v3)")
	fs.StringVar(&g.appID, "github-app-id", env.getenv("WRENCH_GITHUB_APP_ID"), "GitHub App id: act as the App (installation tokens per repository, refreshed) instead of a personal token (default $WRENCH_GITHUB_APP_ID)")
	fs.StringVar(&g.appKey, "github-app-key", env.getenv("WRENCH_GITHUB_APP_KEY_FILE"), "file holding the GitHub App's private key, PEM (default $WRENCH_GITHUB_APP_KEY_FILE)")
	fs.StringVar(&g.caFile, "github-ca", env.getenv("WRENCH_GITHUB_CA_FILE"), "extra CA certificates (PEM) to trust for the GitHub host, e.g. a GitHub Enterprise Server's (default $WRENCH_GITHUB_CA_FILE)")
	g.refresh = 5 * time.Minute
}

// githubConn is what the service uses to reach GitHub: one token source
// (so the App's cached tokens are shared by clones and publishes), an
// HTTP client that trusts the configured CA, and the web root.
type githubConn struct {
	// pol is the server policy: which repositories may run, and whether
	// untested results open draft pull requests.
	pol    *policy.Policy
	tokens github.TokenSource
	app    *github.App // nil with a personal token
	hc     *http.Client
	ca     []byte
	apiURL string
	web    string
}

// open builds the connection; nil when neither an App nor a token is
// configured.
func (g githubFlags) open(log *slog.Logger) (*githubConn, error) {
	if g.appID == "" && g.appKey != "" || g.appID != "" && g.appKey == "" {
		return nil, errors.New("--github-app-id and --github-app-key go together")
	}
	if g.appID == "" && g.token == "" {
		return nil, nil
	}
	gc := &githubConn{apiURL: g.apiURL, web: github.WebURLFor(g.apiURL), hc: &http.Client{Timeout: 30 * time.Second}}
	if g.caFile != "" {
		ca, err := os.ReadFile(g.caFile)
		if err != nil {
			return nil, fmt.Errorf("--github-ca: %w", err)
		}
		pool, err := x509.SystemCertPool()
		if err != nil {
			pool = x509.NewCertPool()
		}
		if !pool.AppendCertsFromPEM(ca) {
			return nil, fmt.Errorf("--github-ca %s: no PEM certificate in it", g.caFile)
		}
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
		gc.hc.Transport, gc.ca = tr, ca
	}
	if g.appID == "" {
		gc.tokens = github.StaticToken(g.token)
		return gc, nil
	}
	key, err := os.ReadFile(g.appKey)
	if err != nil {
		return nil, fmt.Errorf("--github-app-key: %w", err)
	}
	app, err := github.NewApp(github.AppConfig{AppID: g.appID, PrivateKey: key, APIURL: g.apiURL, HTTPClient: gc.hc,
		RefreshBefore: g.refresh, Logger: log.With("component", "github")})
	if err != nil {
		return nil, err
	}
	gc.tokens, gc.app = app, app
	return gc, nil
}

// usePolicy loads the server policy (--policy) the webhook and the
// publisher follow.
func (gc *githubConn) usePolicy(o workerOptions) error {
	if gc == nil {
		return nil
	}
	pol, err := loadPolicy(o)
	if err != nil {
		return err
	}
	gc.pol = pol
	return nil
}

// draftWithoutTests is the policy's draft_without_tests per repository.
func (gc *githubConn) draftWithoutTests(repoURL string) bool {
	if gc.pol == nil {
		return true
	}
	return policy.Bool(gc.pol.For(repoURL).DraftWithoutTests)
}

// credentials gives clones of repositories on the GitHub host the
// repository's token (an installation token minted for it, or the
// personal token); other hosts get nothing from it.
func (gc *githubConn) credentials() workspace.Credentials {
	if gc == nil {
		return nil
	}
	return workspace.CredentialsFunc(func(ctx context.Context, repoURL string) (*workspace.Auth, error) {
		owner, repo, ok := github.RepoOf(gc.web, repoURL)
		if !ok {
			return nil, nil
		}
		tok, err := gc.tokens.Token(ctx, owner, repo)
		if errors.Is(err, github.ErrNotInstalled) {
			return nil, fmt.Errorf("%w: %w", workspace.ErrAuth, err)
		}
		if err != nil {
			return nil, err
		}
		return &workspace.Auth{Token: tok.Value, Hosts: []string{hostOf(gc.web)}}, nil
	})
}

// hostOf is the host[:port] of a web root URL.
func hostOf(web string) string {
	u, err := url.Parse(web)
	if err != nil {
		return ""
	}
	return u.Host
}

// finalizer publishes GitHub tasks' final results (branch, pull request,
// issue comment) from the dispatcher, each effect once through the
// effects ledger in NATS: claims last ackWait, the time after which a
// silent worker is presumed gone.
func (gc *githubConn) finalizer(conn *queue.Conn, holder string, ackWait time.Duration, common commonFlags, env *cliEnv) (dispatcher.Finalizer, error) {
	if gc == nil {
		return nil, nil
	}
	dataDir, err := common.resolvedDataDir()
	if err != nil {
		return nil, err
	}
	if holder == "" {
		host, _ := os.Hostname()
		holder = fmt.Sprintf("%s-%d", host, os.Getpid())
	}
	pub, err := github.NewPublisher(github.PublisherConfig{
		Tokens:            gc.tokens,
		APIURL:            gc.apiURL,
		WebURL:            gc.web,
		HTTPClient:        gc.hc,
		CABundle:          gc.ca,
		CacheDir:          filepath.Join(dataDir, "github"),
		Ledger:            effectsLedger{fx: conn.Effects(), holder: holder, ttl: ackWait},
		SetPullRequest:    conn.States().SetPullRequest,
		DraftWithoutTests: gc.draftWithoutTests,
		Logger:            common.logger(env).With("component", "github"),
	})
	if err != nil {
		return nil, fmt.Errorf("github publisher: %w", err)
	}
	return patchFiller{next: pub, arts: conn.Artifacts()}, nil
}

// patchFiller gives the finalizer the patch of a result whose stored
// record lost it for size (the artifact store keeps it).
type patchFiller struct {
	next dispatcher.Finalizer
	arts *queue.Artifacts
}

func (f patchFiller) Finalize(ctx context.Context, st task.Status) error {
	if r := st.Result; r != nil && r.Patch == "" && slices.Contains(r.Artifacts, "patch.diff") {
		b, err := f.arts.Get(ctx, st.TaskID, "patch.diff")
		if err != nil {
			return fmt.Errorf("read the patch of %s: %w", st.TaskID, err)
		}
		res := *r
		res.Patch = string(b)
		st.Result = &res
	}
	return f.next.Finalize(ctx, st)
}

// effectsLedger is the publisher's ledger on queue.Effects.
type effectsLedger struct {
	fx     *queue.Effects
	holder string
	ttl    time.Duration
}

func (l effectsLedger) Claim(ctx context.Context, taskID string) (github.Claim, error) {
	c, err := l.fx.Claim(ctx, taskID, l.holder, l.ttl)
	if errors.Is(err, queue.ErrClaimed) {
		return nil, fmt.Errorf("%w: %w", github.ErrEffectsClaimed, err)
	}
	if err != nil {
		return nil, err
	}
	return effectsClaim{c}, nil
}

type effectsClaim struct{ c *queue.EffectsClaim }

func fenced(err error) error {
	if errors.Is(err, queue.ErrFenced) {
		return fmt.Errorf("%w: %w", github.ErrFenced, err)
	}
	return err
}

func (c effectsClaim) Check(ctx context.Context) (time.Time, error) {
	t, err := c.c.Check(ctx)
	return t, fenced(err)
}

func (c effectsClaim) Begin(ctx context.Context, effect string) (github.EffectRecord, error) {
	e, err := c.c.Begin(ctx, effect)
	return github.EffectRecord{State: e.State, Token: e.Token, Ref: e.Ref}, fenced(err)
}

func (c effectsClaim) Done(ctx context.Context, effect, ref string) error {
	return fenced(c.c.Done(ctx, effect, ref))
}

func (c effectsClaim) Release(ctx context.Context) error { return c.c.Release(ctx) }

// mountWebhook serves POST /webhooks/github on srv when a secret is set;
// tasks it accepts are submitted through submitter. With GitHub
// credentials (gc not nil) it also takes follow-ups on pull requests and
// tells issues of refused repositories how to allow them.
func (gc *githubConn) mountWebhook(srv *api.Server, g githubFlags, secret string, submitter countingSubmitter, pol *policy.Policy, env *cliEnv, common commonFlags) error {
	if secret == "" {
		return nil
	}
	cfg := github.WebhookConfig{
		Secret: []byte(secret),
		Submit: submitter.Submit,
		Policy: pol,
		WebURL: github.WebURLFor(g.apiURL),
		Logger: common.logger(env).With("component", "github"),
	}
	if gc != nil {
		api, err := github.NewClient(github.ClientConfig{BaseURL: gc.apiURL, Tokens: gc.tokens, HTTPClient: gc.hc})
		if err != nil {
			return err
		}
		cfg.API = api
	}
	_, err := github.Mount(srv, cfg)
	return err
}

// apiSubmitter is what the HTTP API submits through: GitHub tasks come only
// from the signed webhook, never from an API client, so that an API token
// cannot make Wrench push to or comment on a repository.
type apiSubmitter struct{ countingSubmitter }

func (b apiSubmitter) Submit(ctx context.Context, t task.Task) (task.Status, bool, error) {
	if t.Source.Kind == "github" {
		return task.Status{}, false, &task.ValidationError{Fields: []task.FieldError{{
			Field: "source.kind", Problem: `"github" is reserved for tasks from the GitHub webhook`}}}
	}
	return b.countingSubmitter.Submit(ctx, t)
}
