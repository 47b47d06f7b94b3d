package githubtest

import (
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// GitHub App support. After [Server.EnableApp], the server also accepts a
// GitHub App's credentials the way GitHub does: a JWT signed (RS256) with
// the App's private key for the /app endpoints, and installation tokens,
// minted by POST /app/installations/{id}/access_tokens, for everything
// else. Installation tokens expire after [Server.SetTokenTTL] (an hour
// by default, as on GitHub), reach only their installation's
// repositories, and carry its permissions: a call the token lacks the
// permission for answers 403 "Resource not accessible by integration"
// with X-Accepted-GitHub-Permissions naming what it needs, and a git push
// without contents: write answers 403.
//
// Endpoints added:
//
//	GET  /app                                  the App (JWT)
//	GET  /app/installations                    its installations (JWT)
//	GET  /repos/{owner}/{repo}/installation    the installation on a repository (JWT)
//	POST /app/installations/{id}/access_tokens an installation token (JWT; body may narrow repositories)

// Permissions maps a GitHub App permission ("contents", "pull_requests",
// "issues", "metadata") to its access ("read" or "write").
type Permissions map[string]string

// FullPermissions are what Wrench's publisher needs.
func FullPermissions() Permissions {
	return Permissions{"contents": "write", "pull_requests": "write", "issues": "write", "metadata": "read"}
}

// App is the GitHub App the server knows.
type App struct {
	ID   int64
	Slug string
	// PrivateKeyPEM is the App's private key (PKCS#1, as GitHub hands it
	// out), for the client under test.
	PrivateKeyPEM []byte
	key           *rsa.PublicKey
	perms         Permissions
}

// installation is one installation of the App on an account.
type installation struct {
	id      int64
	account string
	repos   map[string]bool // lower-case repository names; nil: all
	perms   Permissions
}

// instToken is an installation token the server minted.
type instToken struct {
	inst    *installation
	repos   map[string]bool // narrowed repositories; nil: the installation's
	perms   Permissions
	expires time.Time
}

// EnableApp registers a GitHub App with a fresh 2048-bit key and the given
// App-level permissions (FullPermissions when nil) and returns it.
func (s *Server) EnableApp(t TB, id int64, perms Permissions) App {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	if perms == nil {
		perms = FullPermissions()
	}
	pemKey := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})
	a := App{ID: id, Slug: "wrench-test", PrivateKeyPEM: pemKey, key: &key.PublicKey, perms: perms}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.app = &a
	return a
}

// Install installs the App on account with perms (the App's when nil), on
// the named repositories or, with none, on all of them; it returns the
// installation id.
func (s *Server) Install(account string, perms Permissions, repos ...string) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if perms == nil && s.app != nil {
		perms = s.app.perms
	}
	s.nextID++
	in := &installation{id: s.nextID, account: account, perms: perms}
	if len(repos) > 0 {
		in.repos = map[string]bool{}
		for _, r := range repos {
			in.repos[strings.ToLower(r)] = true
		}
	}
	s.installs = append(s.installs, in)
	return in.id
}

// SetTokenTTL sets how long installation tokens minted from now on live.
func (s *Server) SetTokenTTL(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tokenTTL = d
}

// TokensIssued counts installation tokens minted so far.
func (s *Server) TokensIssued() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.issued
}

// TokenValues returns every installation token minted so far, for tests
// that check a token appears nowhere it must not.
func (s *Server) TokenValues() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]string, 0, len(s.tokens))
	for v := range s.tokens {
		out = append(out, v)
	}
	return out
}

// principal is who a request authenticated as.
type principal struct {
	static bool       // the server's fixed token: every permission everywhere
	app    bool       // the App's JWT: only /app endpoints
	tok    *instToken // an installation token
}

// can reports whether p may use perm at level on owner/repo; when it may
// not, missing is what to name in X-Accepted-GitHub-Permissions.
func (p principal) can(owner, repo, perm, level string) (ok bool, missing string) {
	switch {
	case p.static:
		return true, ""
	case p.tok == nil:
		return false, perm + "=" + level
	}
	in := p.tok.inst
	if !strings.EqualFold(in.account, owner) {
		return false, ""
	}
	repos := p.tok.repos
	if repos == nil {
		repos = in.repos
	}
	if repos != nil && !repos[strings.ToLower(repo)] {
		return false, ""
	}
	have := p.tok.perms[perm]
	if have == "write" || have == level || perm == "metadata" && level == "read" {
		return true, ""
	}
	return false, perm + "=" + level
}

// authenticate reads the Authorization header (Bearer or token scheme) or
// git's basic auth password.
func (s *Server) authenticate(cred string) principal {
	if cred == "" {
		return principal{}
	}
	if cred == s.token {
		return principal{static: true}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if tok := s.tokens[cred]; tok != nil && time.Now().Before(tok.expires) {
		return principal{tok: tok}
	}
	if s.app != nil && strings.Count(cred, ".") == 2 && s.verifyJWT(cred) == nil {
		return principal{app: true}
	}
	return principal{}
}

// bearer returns the credential of an Authorization header.
func bearer(h string) string {
	if v, ok := strings.CutPrefix(h, "Bearer "); ok {
		return v
	}
	v, _ := strings.CutPrefix(h, "token ")
	return v
}

// verifyJWT checks an App JWT: RS256 with the App's key, iss the App's id,
// issued no later than now (60s of skew), expiring within ten minutes of
// issue and not yet expired. s.mu must be held.
func (s *Server) verifyJWT(jwt string) error {
	parts := strings.Split(jwt, ".")
	var hdr struct{ Alg, Typ string }
	if err := decodeSegment(parts[0], &hdr); err != nil || hdr.Alg != "RS256" {
		return fmt.Errorf("bad JWT header")
	}
	sig, err := base64.RawURLEncoding.DecodeString(parts[2])
	if err != nil {
		return err
	}
	sum := sha256.Sum256([]byte(parts[0] + "." + parts[1]))
	if err := rsa.VerifyPKCS1v15(s.app.key, crypto.SHA256, sum[:], sig); err != nil {
		return err
	}
	var claims struct {
		Iat, Exp int64
		Iss      json.RawMessage
	}
	if err := decodeSegment(parts[1], &claims); err != nil {
		return err
	}
	iss := strings.Trim(string(claims.Iss), `"`)
	now := time.Now().Unix()
	switch {
	case iss != strconv.FormatInt(s.app.ID, 10):
		return fmt.Errorf("iss %s is not the App", iss)
	case claims.Iat > now+60, claims.Exp <= now, claims.Exp-claims.Iat > 600:
		return fmt.Errorf("JWT outside its time window")
	}
	return nil
}

func decodeSegment(seg string, v any) error {
	b, err := base64.RawURLEncoding.DecodeString(seg)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}

// serveApp answers the App endpoints; handled is false for other paths.
func (s *Server) serveApp(w http.ResponseWriter, r *http.Request, path string, p principal) (handled bool) {
	parts := strings.Split(strings.TrimPrefix(path, "/"), "/")
	isInstallation := len(parts) == 4 && parts[0] == "repos" && parts[3] == "installation"
	if parts[0] != "app" && !isInstallation {
		return false
	}
	if !p.app {
		writeMessage(w, http.StatusUnauthorized, "A JSON web token could not be decoded")
		return true
	}
	switch {
	case len(parts) == 1 && r.Method == http.MethodGet:
		s.mu.Lock()
		a := *s.app
		s.mu.Unlock()
		writeJSON(w, http.StatusOK, map[string]any{"id": a.ID, "slug": a.Slug, "name": "Wrench (test)", "permissions": a.perms})
	case len(parts) == 2 && parts[1] == "installations" && r.Method == http.MethodGet:
		s.mu.Lock()
		out := []map[string]any{}
		for _, in := range s.installs {
			out = append(out, installationJSON(in))
		}
		s.mu.Unlock()
		writeJSON(w, http.StatusOK, out)
	case isInstallation && r.Method == http.MethodGet:
		in := s.installationFor(parts[1], parts[2])
		if in == nil {
			writeMessage(w, http.StatusNotFound, "Not Found")
			return true
		}
		writeJSON(w, http.StatusOK, installationJSON(in))
	case len(parts) == 4 && parts[1] == "installations" && parts[3] == "access_tokens" && r.Method == http.MethodPost:
		s.mintToken(w, r, parts[2])
	default:
		writeMessage(w, http.StatusNotFound, "Not Found")
	}
	return true
}

// installationFor returns the installation covering owner/repo.
func (s *Server) installationFor(owner, repo string) *installation {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.repoExists(owner, repo) {
		return nil
	}
	for _, in := range s.installs {
		if strings.EqualFold(in.account, owner) && (in.repos == nil || in.repos[strings.ToLower(repo)]) {
			return in
		}
	}
	return nil
}

func installationJSON(in *installation) map[string]any {
	sel := "all"
	if in.repos != nil {
		sel = "selected"
	}
	return map[string]any{"id": in.id, "account": map[string]any{"login": in.account, "type": "Organization"},
		"app_id": 1, "target_type": "Organization", "permissions": in.perms, "repository_selection": sel}
}

// mintToken answers POST /app/installations/{id}/access_tokens.
func (s *Server) mintToken(w http.ResponseWriter, r *http.Request, idText string) {
	var in struct {
		Repositories []string    `json:"repositories"`
		Permissions  Permissions `json:"permissions"`
	}
	if r.ContentLength != 0 {
		if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
			writeMessage(w, http.StatusBadRequest, "Problems parsing JSON")
			return
		}
	}
	id, _ := strconv.ParseInt(idText, 10, 64)
	s.mu.Lock()
	defer s.mu.Unlock()
	var inst *installation
	for _, i := range s.installs {
		if i.id == id {
			inst = i
		}
	}
	if inst == nil {
		writeMessage(w, http.StatusNotFound, "Not Found")
		return
	}
	tok := &instToken{inst: inst, perms: inst.perms, expires: time.Now().Add(s.tokenTTL).Truncate(time.Second)}
	if len(in.Repositories) > 0 {
		tok.repos = map[string]bool{}
		for _, name := range in.Repositories {
			if inst.repos != nil && !inst.repos[strings.ToLower(name)] {
				write422(w, fmt.Sprintf(`{"resource":"Installation","code":"custom","message":"repository %s is not installed"}`, name))
				return
			}
			tok.repos[strings.ToLower(name)] = true
		}
	}
	b := make([]byte, 18)
	_, _ = rand.Read(b)
	value := "ghs_" + hex.EncodeToString(b)
	if s.tokens == nil {
		s.tokens = map[string]*instToken{}
	}
	s.tokens[value] = tok
	s.issued++
	writeJSON(w, http.StatusCreated, map[string]any{"token": value, "expires_at": tok.expires.UTC().Format(time.RFC3339),
		"permissions": tok.perms, "repository_selection": "selected"})
}

// forbidden answers a call the token lacks a permission for, as GitHub
// does.
func forbidden(w http.ResponseWriter, missing string) {
	if missing != "" {
		w.Header().Set("X-Accepted-GitHub-Permissions", missing)
	}
	writeMessage(w, http.StatusForbidden, "Resource not accessible by integration")
}

// RevokeTokens invalidates every installation token minted so far, as an
// App's owner revoking them would.
func (s *Server) RevokeTokens() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, tok := range s.tokens {
		tok.expires = time.Time{}
	}
}
