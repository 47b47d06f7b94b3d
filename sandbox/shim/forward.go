package shim

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/wrenchworks/wrench/sandbox"
)

// forwardDialTimeout bounds the dial of the egress socket; it is local, so
// a slow dial means nothing is serving it.
const forwardDialTimeout = 5 * time.Second

// forwardBulk is the copy buffer of a connection moving bulk data.
const forwardBulk = 256 << 10

// halfCloseGrace is how long a client may still send after the proxy's
// side of its connection ended.
const halfCloseGrace = time.Minute

// Forwarder accepts TCP connections on a loopback address inside the
// sandbox (where HTTP_PROXY points) and passes each to the egress proxy
// through its unix socket, which the host serves into the sandbox through
// a bind mount: the client's socket itself goes over (SCM_RIGHTS, see
// sandbox.HandOverByte) and the proxy serves it directly, so the bytes do
// not pass through the shim; where the proxy cannot take the socket (a
// runtime such as gVisor), the forwarder relays the bytes over the unix
// connection instead. It adds nothing to the stream: the policy, the
// audit and the answers are the proxy's. When the socket is not being
// served (no egress session is open), a client gets a 403 that says so.
type Forwarder struct {
	ln     net.Listener
	socket string

	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
	wg     sync.WaitGroup
}

// Forward listens on listen (host:port) and forwards every connection to
// the unix socket at socket until [Forwarder.Close].
func Forward(listen, socket string) (*Forwarder, error) {
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return nil, fmt.Errorf("shim: egress forwarder: %w", err)
	}
	f := &Forwarder{ln: ln, socket: socket, conns: map[net.Conn]struct{}{}}
	f.wg.Add(1)
	go func() { // ends when Close closes ln
		defer f.wg.Done()
		f.accept()
	}()
	return f, nil
}

// Addr is the address the forwarder listens on.
func (f *Forwarder) Addr() net.Addr { return f.ln.Addr() }

// Close stops accepting, closes every forwarded connection and waits for
// their goroutines. It is safe to call more than once.
func (f *Forwarder) Close() error {
	f.mu.Lock()
	f.closed = true
	for c := range f.conns {
		c.Close()
	}
	f.mu.Unlock()
	err := f.ln.Close()
	f.wg.Wait()
	if errors.Is(err, net.ErrClosed) {
		err = nil
	}
	return err
}

func (f *Forwarder) accept() {
	for {
		c, err := f.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			time.Sleep(10 * time.Millisecond) // EMFILE and the like: back off
			continue
		}
		if !f.track(c) {
			c.Close()
			return
		}
		f.wg.Add(1)
		go func() {
			defer f.wg.Done()
			defer f.untrack(c)
			f.serve(c)
		}()
	}
}

// track registers c so Close can close it; false once closed.
func (f *Forwarder) track(c net.Conn) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return false
	}
	f.conns[c] = struct{}{}
	return true
}

func (f *Forwarder) untrack(c net.Conn) {
	f.mu.Lock()
	delete(f.conns, c)
	f.mu.Unlock()
	c.Close()
}

// serve hands c over to the proxy through a fresh connection to the
// socket (see [handOver]); when the proxy cannot take it, it relays c over
// that connection instead: each direction is copied until its source
// ends, then the other side's write half is closed, so half-closes travel
// through.
func (f *Forwarder) serve(c net.Conn) {
	up, err := net.DialTimeout("unix", f.socket, forwardDialTimeout)
	if err != nil {
		refuseNoProxy(c, err)
		return
	}
	if !f.track(up) {
		up.Close()
		return
	}
	defer f.untrack(up)
	switch handOver(c, up) {
	case handedOver, handOverFailed:
		return
	}
	done := make(chan struct{})
	go func() { // awaited below
		defer close(done)
		copyConn(up, c)
		closeWrite(up)
	}()
	copyConn(c, up)
	closeWrite(c)
	// The proxy closed its side (it half-closes only when a tunnel's
	// server did): the client gets a bounded time to finish sending.
	c.SetReadDeadline(time.Now().Add(halfCloseGrace))
	<-done
}

func closeWrite(c net.Conn) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		cw.CloseWrite()
	}
}

// refuseNoProxy answers a client whose proxy is not being served: it reads
// the request head (so the answer is not lost to a reset), says why in
// plain words, and closes.
func refuseNoProxy(c net.Conn, dialErr error) {
	c.SetDeadline(time.Now().Add(forwardDialTimeout))
	req, err := http.ReadRequest(bufio.NewReader(io.LimitReader(c, 64<<10)))
	target := "the host"
	if err == nil {
		target = req.Host
	}
	body := fmt.Sprintf("wrench egress: %s was not contacted: no egress proxy is serving this sandbox now (%v).\n"+
		"Network access is off unless the server policy's egress allowlist grants hosts to this phase; "+
		"in the agent phase it is off by default. There is no other route out of the sandbox.\n", target, unwrapAll(dialErr))
	fmt.Fprintf(c, "HTTP/1.1 403 Forbidden\r\nContent-Type: text/plain; charset=utf-8\r\nX-Wrench-Egress: off\r\nConnection: close\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
}

// unwrapAll returns the innermost error (the syscall's), which reads
// better than the dial's full chain.
func unwrapAll(err error) error {
	for {
		next := errors.Unwrap(err)
		if next == nil {
			return err
		}
		err = next
	}
}

// copyConn copies src to dst in user space: measured here, splicing a unix
// socket to TCP was 2-3 times slower than copies with a large buffer. It
// reads into a small buffer until a read fills it, then into a large one,
// so idle connections hold little memory.
func copyConn(dst, src net.Conn) {
	buf := make([]byte, 16<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
		if n == len(buf) && len(buf) < forwardBulk {
			buf = make([]byte, forwardBulk)
		}
	}
}

// The outcomes of a hand-over.
const (
	handedOver     = iota // the proxy serves the client on its own socket now
	handOverRelay         // the proxy declined: relay the bytes
	handOverFailed        // the proxy did not answer: give up
)

// handOver passes the client's socket to the proxy (SCM_RIGHTS with
// sandbox.HandOverByte) and reads its answer. Once the proxy holds the
// socket, bytes go between it and the client without this process: one
// copy fewer each way. The shim's own descriptor is closed by the caller;
// the connection lives on in the proxy's.
func handOver(c, up net.Conn) int {
	tc, ok := c.(*net.TCPConn)
	uc, ok2 := up.(*net.UnixConn)
	if !ok || !ok2 {
		return handOverRelay // nothing sent: the proxy sees a plain client
	}
	raw, err := tc.SyscallConn()
	if err != nil {
		return handOverRelay
	}
	var sendErr error
	err = raw.Control(func(fd uintptr) {
		_, _, sendErr = uc.WriteMsgUnix([]byte{sandbox.HandOverByte}, syscall.UnixRights(int(fd)), nil)
	})
	switch {
	case err != nil:
		return handOverFailed
	case sendErr != nil:
		// Nothing was sent (one byte goes whole or not at all), so the
		// proxy still waits for a first byte: relay on this connection.
		return handOverRelay
	}
	uc.SetReadDeadline(time.Now().Add(forwardDialTimeout))
	ack := make([]byte, 1)
	_, err = io.ReadFull(uc, ack)
	uc.SetReadDeadline(time.Time{})
	switch {
	case err != nil:
		return handOverFailed
	case ack[0] == sandbox.HandOverAck:
		return handedOver
	}
	return handOverRelay
}

// withProxyEnv returns env with the proxy variables for listen set (in
// place of any the environment had).
func withProxyEnv(env []string, listen string) []string {
	proxy := sandbox.ProxyEnv(listen)
	out := make([]string, 0, len(env)+len(proxy))
	for _, kv := range env {
		if k, _, _ := strings.Cut(kv, "="); proxy[k] == "" {
			out = append(out, kv)
		}
	}
	for k, v := range proxy {
		out = append(out, k+"="+v)
	}
	slices.Sort(out)
	return out
}
