package github

import (
	"context"
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// AppConfig configures an [App].
type AppConfig struct {
	// AppID is the App's id (numeric) or client id ("Iv23…"): the JWT's
	// issuer.
	AppID string
	// PrivateKey is the App's private key as PEM (PKCS#1 "RSA PRIVATE KEY",
	// as GitHub hands it out, or PKCS#8).
	PrivateKey []byte
	// APIURL is the REST API root (DefaultAPIURL when empty).
	APIURL string
	// HTTPClient sends the App's calls (a client with a 30s timeout when
	// nil).
	HTTPClient *http.Client
	// RefreshBefore is how long before its expiry a cached installation
	// token is replaced (5 minutes when zero), and at most a quarter of
	// the token's lifetime, so that a token is never used in its last
	// stretch, whatever the lifetime GitHub gives.
	RefreshBefore time.Duration
	// Logger receives one line per token minted (never the token); nil
	// discards.
	Logger *slog.Logger
}

// App authenticates as a GitHub App: a JWT signed with the App's private
// key (RS256) for the /app endpoints, and, for everything Wrench does on a
// repository, an installation token scoped to that repository, minted on
// first use, cached, and replaced before it expires. It is a
// [TokenSource] and safe for concurrent use.
type App struct {
	cfg AppConfig
	key *rsa.PrivateKey
	api *Client
	log *slog.Logger

	mu     sync.Mutex
	inst   map[string]int64       // installation id by lower-case "owner/repo"
	tokens map[string]*appToken   // by lower-case "owner/repo"
	locks  map[string]*sync.Mutex // one mint at a time per repository
}

// appToken is a cached installation token.
type appToken struct {
	tok     Token
	refresh time.Time // replace from this time on
}

// ErrNotInstalled: the App is not installed on the repository (or the
// installation does not include it).
var ErrNotInstalled = errors.New("github: the GitHub App is not installed on the repository")

// NewApp checks cfg, reads the private key and returns an App.
func NewApp(cfg AppConfig) (*App, error) {
	if strings.TrimSpace(cfg.AppID) == "" {
		return nil, errors.New("github: App id is required")
	}
	key, err := parsePrivateKey(cfg.PrivateKey)
	if err != nil {
		return nil, err
	}
	hc := cfg.HTTPClient
	if hc == nil {
		hc = &http.Client{Timeout: 30 * time.Second}
	}
	api, err := NewClient(ClientConfig{BaseURL: cfg.APIURL, HTTPClient: hc})
	if err != nil {
		return nil, err
	}
	if cfg.RefreshBefore <= 0 {
		cfg.RefreshBefore = 5 * time.Minute
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &App{cfg: cfg, key: key, api: api, log: log,
		inst: map[string]int64{}, tokens: map[string]*appToken{}, locks: map[string]*sync.Mutex{}}, nil
}

// parsePrivateKey reads an RSA private key from PEM, PKCS#1 or PKCS#8.
func parsePrivateKey(data []byte) (*rsa.PrivateKey, error) {
	block, _ := pem.Decode(data)
	if block == nil {
		return nil, errors.New("github: App private key: no PEM block (want the .pem file GitHub generated)")
	}
	if k, err := x509.ParsePKCS1PrivateKey(block.Bytes); err == nil {
		return k, nil
	}
	k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("github: App private key: %w", err)
	}
	rk, ok := k.(*rsa.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("github: App private key is %T, want RSA", k)
	}
	return rk, nil
}

// jwt returns a JWT for the /app endpoints: issued a minute ago (GitHub's
// advice against clock drift), valid for nine minutes (GitHub allows ten).
func (a *App) jwt() (string, error) {
	now := time.Now()
	hdr := base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"RS256","typ":"JWT"}`))
	iss, err := json.Marshal(a.cfg.AppID)
	if err != nil {
		return "", err
	}
	if _, numErr := strconv.ParseInt(a.cfg.AppID, 10, 64); numErr == nil {
		iss = []byte(a.cfg.AppID)
	}
	claims := fmt.Sprintf(`{"iat":%d,"exp":%d,"iss":%s}`, now.Add(-time.Minute).Unix(), now.Add(9*time.Minute).Unix(), iss)
	signing := hdr + "." + base64.RawURLEncoding.EncodeToString([]byte(claims))
	sum := sha256.Sum256([]byte(signing))
	sig, err := rsa.SignPKCS1v15(rand.Reader, a.key, crypto.SHA256, sum[:])
	if err != nil {
		return "", fmt.Errorf("github: sign App JWT: %w", err)
	}
	return signing + "." + base64.RawURLEncoding.EncodeToString(sig), nil
}

// Token returns an installation token for owner/repo: the cached one while
// it is fresh, else a new one scoped to that repository.
func (a *App) Token(ctx context.Context, owner, repo string) (Token, error) {
	key := strings.ToLower(owner + "/" + repo)
	a.mu.Lock()
	l := a.locks[key]
	if l == nil {
		l = &sync.Mutex{}
		a.locks[key] = l
	}
	a.mu.Unlock()
	l.Lock()
	defer l.Unlock()
	a.mu.Lock()
	c := a.tokens[key]
	a.mu.Unlock()
	if c != nil && time.Now().Before(c.refresh) {
		return c.tok, nil
	}
	tok, err := a.mint(ctx, owner, repo)
	if err != nil {
		return Token{}, err
	}
	margin := a.cfg.RefreshBefore
	if life := time.Until(tok.ExpiresAt); life/4 < margin {
		margin = life / 4
	}
	a.mu.Lock()
	a.tokens[key] = &appToken{tok: tok, refresh: tok.ExpiresAt.Add(-margin)}
	a.mu.Unlock()
	return tok, nil
}

// Forget drops the cached token for owner/repo when it is value (GitHub
// refused it), so the next Token mints a new one.
func (a *App) Forget(owner, repo, value string) {
	key := strings.ToLower(owner + "/" + repo)
	a.mu.Lock()
	defer a.mu.Unlock()
	if c := a.tokens[key]; c != nil && c.tok.Value == value {
		delete(a.tokens, key)
	}
}

// mint asks GitHub for an installation token scoped to owner/repo.
func (a *App) mint(ctx context.Context, owner, repo string) (Token, error) {
	id, err := a.installation(ctx, owner, repo)
	if err != nil {
		return Token{}, err
	}
	jwt, err := a.jwt()
	if err != nil {
		return Token{}, err
	}
	var out struct {
		Token       string            `json:"token"`
		ExpiresAt   time.Time         `json:"expires_at"`
		Permissions map[string]string `json:"permissions"`
	}
	path := "/app/installations/" + strconv.FormatInt(id, 10) + "/access_tokens"
	_, err = a.api.do(ctx, jwt, http.MethodPost, path, nil, map[string]any{"repositories": []string{repo}}, &out)
	if errors.Is(err, ErrNotFound) {
		// The installation went away: look it up again next time.
		a.mu.Lock()
		delete(a.inst, strings.ToLower(owner+"/"+repo))
		a.mu.Unlock()
	}
	if err != nil {
		return Token{}, fmt.Errorf("github: installation token for %s/%s: %w", owner, repo, err)
	}
	if out.Token == "" || out.ExpiresAt.IsZero() {
		return Token{}, fmt.Errorf("github: installation token for %s/%s: answer has no token or expiry", owner, repo)
	}
	if out.Permissions == nil {
		out.Permissions = map[string]string{}
	}
	a.log.Info("github installation token minted", "repo", owner+"/"+repo, "installation", id,
		"expires_at", out.ExpiresAt, "permissions", permList(out.Permissions))
	return Token{Value: out.Token, ExpiresAt: out.ExpiresAt, Permissions: out.Permissions}, nil
}

// installation returns the id of the App's installation on owner/repo.
func (a *App) installation(ctx context.Context, owner, repo string) (int64, error) {
	key := strings.ToLower(owner + "/" + repo)
	a.mu.Lock()
	id, ok := a.inst[key]
	a.mu.Unlock()
	if ok {
		return id, nil
	}
	jwt, err := a.jwt()
	if err != nil {
		return 0, err
	}
	var out struct {
		ID int64 `json:"id"`
	}
	_, err = a.api.do(ctx, jwt, http.MethodGet, repoPath(owner, repo, "installation"), nil, nil, &out)
	if errors.Is(err, ErrNotFound) {
		return 0, fmt.Errorf("%w: %s/%s (install the App on it, or add the repository to the installation)", ErrNotInstalled, owner, repo)
	}
	if err != nil {
		return 0, fmt.Errorf("github: find the App's installation on %s/%s: %w", owner, repo, err)
	}
	a.mu.Lock()
	a.inst[key] = out.ID
	a.mu.Unlock()
	return out.ID, nil
}

// AppInfo is what GitHub says about the App.
type AppInfo struct {
	ID          int64             `json:"id"`
	Slug        string            `json:"slug"`
	Name        string            `json:"name"`
	Permissions map[string]string `json:"permissions"`
}

// Installation is one installation of the App.
type Installation struct {
	ID      int64 `json:"id"`
	Account struct {
		Login string `json:"login"`
	} `json:"account"`
	Permissions         map[string]string `json:"permissions"`
	RepositorySelection string            `json:"repository_selection"`
}

// Info returns the App (GET /app).
func (a *App) Info(ctx context.Context) (AppInfo, error) {
	var out AppInfo
	jwt, err := a.jwt()
	if err == nil {
		_, err = a.api.do(ctx, jwt, http.MethodGet, "/app", nil, nil, &out)
	}
	return out, err
}

// Installations returns the App's installations (GET /app/installations,
// up to 100).
func (a *App) Installations(ctx context.Context) ([]Installation, error) {
	var out []Installation
	jwt, err := a.jwt()
	if err == nil {
		_, err = a.api.do(ctx, jwt, http.MethodGet, "/app/installations", map[string][]string{"per_page": {"100"}}, nil, &out)
	}
	return out, err
}

// permList is "contents:write,issues:write" for a log line.
func permList(p map[string]string) string {
	var parts []string
	for k, v := range p {
		parts = append(parts, k+":"+v)
	}
	sort.Strings(parts)
	return strings.Join(parts, ",")
}
