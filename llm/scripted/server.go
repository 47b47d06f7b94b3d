package scripted

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"
)

// DefaultAddr is where [Start] listens when given an empty address.
const DefaultAddr = "127.0.0.1:0"

// Server is a [Handler] served on a TCP listener. Close stops it.
type Server struct {
	*Handler
	ln   net.Listener
	srv  *http.Server
	done chan struct{} // closed when Serve has returned
	err  error         // Serve's error, read after done

	closeOnce sync.Once
	closeErr  error
}

// Start listens on addr (host:port; empty means [DefaultAddr]) and serves s
// until Close. ctx bounds only the listen; the server runs until Close.
func Start(ctx context.Context, s *Script, addr string, opts ...Option) (*Server, error) {
	if addr == "" {
		addr = DefaultAddr
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("scripted model: listen %s: %w", addr, err)
	}
	h := NewHandler(s, opts...)
	srv := &Server{
		Handler: h,
		ln:      ln,
		srv:     &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second},
		done:    make(chan struct{}),
	}
	go func() {
		defer close(srv.done)
		if err := srv.srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			srv.err = err
		}
	}()
	return srv, nil
}

// URL returns the base URL clients use, ending in /v1.
func (s *Server) URL() string { return "http://" + s.ln.Addr().String() + "/v1" }

// Addr returns the address the server listens on.
func (s *Server) Addr() net.Addr { return s.ln.Addr() }

// Close stops the server: it stops accepting, gives requests in flight a
// moment to finish, then drops them, and waits for the serving goroutine.
// It is idempotent.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		if err := s.srv.Shutdown(ctx); err != nil {
			_ = s.srv.Close()
		}
		<-s.done
		s.closeErr = s.err
	})
	return s.closeErr
}

// ServeFile loads the script at path, serves it on addr until ctx is done,
// and then closes the server. ready, when not nil, is called with the base
// URL once the server accepts requests. It is what `wrench model scripted
// --script FILE --addr HOST:PORT` runs.
func ServeFile(ctx context.Context, path, addr string, ready func(url string), opts ...Option) error {
	s, err := Load(path)
	if err != nil {
		return err
	}
	srv, err := Start(ctx, s, addr, opts...)
	if err != nil {
		return err
	}
	if ready != nil {
		ready(srv.URL())
	}
	select {
	case <-ctx.Done():
	case <-srv.done:
	}
	return srv.Close()
}
