package natsserver

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"
)

// ErrInsecureListen is returned by [Start] for a listener beyond loopback
// without client authentication or without TLS.
var ErrInsecureListen = errors.New("a NATS listener beyond loopback needs user nkeys and TLS")

// isLoopback reports whether host (of a listen address) reaches only this
// machine.
func isLoopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// authOptions applies cfg's users and TLS to opts. Once any user is
// configured, every connection must sign in as one, the in-process ones
// included (those use the server's own user, see [Server.ConnectOption]).
func (s *Server) authOptions(cfg Config, opts *server.Options) error {
	if len(cfg.NKeys) > 0 {
		kp, err := nkeys.CreateUser()
		if err != nil {
			return fmt.Errorf("start nats: own user: %w", err)
		}
		pub, _ := kp.PublicKey()
		s.self = kp
		opts.Nkeys = append(opts.Nkeys, &server.NkeyUser{Nkey: pub})
		for _, k := range cfg.NKeys {
			if !nkeys.IsValidPublicUserKey(k) {
				return fmt.Errorf("start nats: %q is not a public user nkey", k)
			}
			opts.Nkeys = append(opts.Nkeys, &server.NkeyUser{Nkey: k})
		}
	}
	if cfg.TLS != nil {
		opts.TLSConfig = cfg.TLS
		opts.TLS = true
		opts.TLSTimeout = 5
	}
	return nil
}

// signIn is the nats.Option with which an in-process connection signs in
// as the server's own user (nothing when the server has no users).
func (s *Server) signIn() nats.Option {
	if s.self == nil {
		return func(*nats.Options) error { return nil }
	}
	pub, _ := s.self.PublicKey()
	return nats.Nkey(pub, s.self.Sign)
}

// EnsureUserSeed returns the public key of the user nkey whose seed is in
// path, creating the file (mode 0600, its directory 0700) with a new seed
// when it does not exist. A worker signs in with that file
// (nats.NkeyOptionFromSeed, `wrench worker --nats-nkey FILE`).
func EnsureUserSeed(path string) (string, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		kp, err := nkeys.CreateUser()
		if err != nil {
			return "", fmt.Errorf("create nats user: %w", err)
		}
		seed, _ := kp.Seed()
		if err := writePrivate(path, seed); err != nil {
			return "", fmt.Errorf("write nats user seed: %w", err)
		}
		data = seed
	} else if err != nil {
		return "", fmt.Errorf("read nats user seed: %w", err)
	}
	kp, err := nkeys.ParseDecoratedNKey(data)
	if err != nil {
		return "", fmt.Errorf("nats user seed %s: %w", path, err)
	}
	pub, err := kp.PublicKey()
	if err != nil || !nkeys.IsValidPublicUserKey(pub) {
		return "", fmt.Errorf("nats user seed %s: not a user seed", path)
	}
	return pub, nil
}

// EnsureCert returns a TLS configuration with the certificate and key in
// dir (cert.pem, key.pem), creating a self-signed ECDSA certificate valid
// for hosts (names or IPs; this machine's name and addresses are added)
// when they do not exist. cert.pem is also what clients trust
// (`wrench worker --nats-ca FILE`).
func EnsureCert(dir string, hosts []string) (*tls.Config, string, error) {
	certFile, keyFile := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if _, err := os.Stat(certFile); errors.Is(err, os.ErrNotExist) {
		if err := selfSign(certFile, keyFile, hosts); err != nil {
			return nil, "", fmt.Errorf("make a nats certificate: %w", err)
		}
	}
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, "", fmt.Errorf("load the nats certificate: %w", err)
	}
	return &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}, certFile, nil
}

func selfSign(certFile, keyFile string, hosts []string) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
	if err != nil {
		return err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: "wrench embedded NATS"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().AddDate(10, 0, 0),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	for _, h := range append(hosts, localNames()...) {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else if h != "" {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return err
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return err
	}
	if err := writePrivate(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb})); err != nil {
		return err
	}
	return os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644)
}

// localNames are this machine's host name, localhost and its addresses.
func localNames() []string {
	out := []string{"localhost"}
	if h, err := os.Hostname(); err == nil {
		out = append(out, h)
	}
	addrs, _ := net.InterfaceAddrs()
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok {
			out = append(out, n.IP.String())
		}
	}
	return out
}

// writePrivate writes data to path readable by its owner only.
func writePrivate(path string, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	return os.WriteFile(path, data, 0o600)
}
