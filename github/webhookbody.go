package github

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"net/http"
	"strings"
	"time"
)

// Defaults of the webhook's body reading (see WebhookConfig).
const (
	// DefaultMaxBody: Wrench acts on issue, comment and review events,
	// whose text fields GitHub caps at 65,536 characters; their payloads
	// stay far below this. (GitHub's own cap, for pushes, is 25 MB.)
	DefaultMaxBody = 5 << 20
	// DefaultMaxReads bounds the bodies read at once, before their
	// signature is known.
	DefaultMaxReads = 4
	// DefaultReadTimeout bounds reading one body, waiting for a turn
	// included.
	DefaultReadTimeout = 30 * time.Second
)

// bodyError is why a delivery's body was not accepted.
type bodyError struct {
	code   int
	reason string
}

// readSigned reads a delivery's body while computing its HMAC, and
// returns it only when X-Hub-Signature-256 matches. Nothing is read when
// the header is missing or malformed or Content-Length is over the limit;
// at most MaxReads bodies are read at once (a delivery that cannot get a
// turn within ReadTimeout is answered 503), each within ReadTimeout.
func (w *Webhook) readSigned(rw http.ResponseWriter, r *http.Request) ([]byte, *bodyError) {
	want, ok := parseSignature(r.Header.Get(HeaderSignature))
	if !ok {
		return nil, &bodyError{http.StatusUnauthorized, "missing or malformed " + HeaderSignature}
	}
	if r.ContentLength > w.cfg.MaxBody {
		return nil, w.tooLarge()
	}
	deadline := time.Now().Add(w.cfg.ReadTimeout)
	_ = http.NewResponseController(rw).SetReadDeadline(deadline) // unsupported by some writers
	turn := time.NewTimer(time.Until(deadline))
	defer turn.Stop()
	select {
	case w.reads <- struct{}{}:
		defer func() { <-w.reads }()
	case <-turn.C:
		rw.Header().Set("Retry-After", "5")
		return nil, &bodyError{http.StatusServiceUnavailable, "too many deliveries being read; retry later"}
	case <-r.Context().Done():
		return nil, &bodyError{http.StatusServiceUnavailable, "the client went away"}
	}
	mac := hmac.New(sha256.New, w.cfg.Secret)
	body, err := readHashed(http.MaxBytesReader(rw, r.Body, w.cfg.MaxBody), r.ContentLength, mac)
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, w.tooLarge()
		}
		return nil, &bodyError{http.StatusBadRequest, "read body: " + err.Error()}
	}
	if !hmac.Equal(want, mac.Sum(nil)) {
		return nil, &bodyError{http.StatusUnauthorized, "wrong " + HeaderSignature}
	}
	return body, nil
}

func (w *Webhook) tooLarge() *bodyError {
	return &bodyError{http.StatusRequestEntityTooLarge, fmt.Sprintf("body over %d bytes", w.cfg.MaxBody)}
}

// parseSignature decodes "sha256=<64 hex digits>".
func parseSignature(header string) ([]byte, bool) {
	hexSig, ok := strings.CutPrefix(header, "sha256=")
	if !ok || len(hexSig) != 2*sha256.Size {
		return nil, false
	}
	sig, err := hex.DecodeString(hexSig)
	return sig, err == nil
}

// readHashed reads r to its end into a buffer sized by the announced
// length (when known), feeding mac as it goes.
func readHashed(r io.Reader, length int64, mac hash.Hash) ([]byte, error) {
	var buf bytes.Buffer
	if length > 0 {
		buf.Grow(int(length))
	}
	_, err := io.Copy(io.MultiWriter(&buf, mac), r)
	return buf.Bytes(), err
}
