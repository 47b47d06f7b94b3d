package egress

import (
	"io"
	"net"
	"os"
	"syscall"
	"time"

	"github.com/wrenchworks/wrench/sandbox"
)

// The hand-over protocol on the socket (see sandbox.HandOverByte): a
// connection whose first byte is sandbox.HandOverByte carries, with that
// byte, the client's own TCP socket (SCM_RIGHTS). The proxy answers
// sandbox.HandOverAck, closes the unix connection and serves the client on
// its socket directly, so bytes cross one process, not two. When no usable
// socket came with the byte (a runtime such as gVisor cannot pass host
// sockets), it answers sandbox.HandOverNack and serves the unix connection
// itself as the client's byte stream. Any other first byte starts a plain
// client's request.

// adopt returns the client to serve on c: the socket handed over, a plain
// client (c, its first byte put back), or nil when c said nothing.
func (s *Session) adopt(c *net.UnixConn) net.Conn {
	buf := make([]byte, 1)
	oob := make([]byte, syscall.CmsgSpace(4)) // room for one descriptor: more are truncated and closed by the kernel
	c.SetReadDeadline(time.Now().Add(s.cfg.IdleTimeout))
	n, oobn, flags, _, err := c.ReadMsgUnix(buf, oob)
	c.SetReadDeadline(time.Time{})
	fds := rights(oob[:oobn])
	if err != nil || n == 0 {
		closeAll(fds)
		return nil
	}
	if buf[0] != sandbox.HandOverByte {
		closeAll(fds)
		return &prefixConn{UnixConn: c, prefix: buf[:1]}
	}
	if len(fds) == 1 && flags&syscall.MSG_CTRUNC == 0 {
		if tc := tcpConn(fds[0]); tc != nil {
			c.Write([]byte{sandbox.HandOverAck})
			return tc
		}
	} else {
		closeAll(fds)
	}
	c.Write([]byte{sandbox.HandOverNack})
	return c
}

// tcpConn makes a connection of a descriptor, when it is a TCP socket;
// it closes fd either way.
func tcpConn(fd int) *net.TCPConn {
	f := os.NewFile(uintptr(fd), "egress-client")
	defer f.Close()
	c, err := net.FileConn(f) // dups fd, makes it non-blocking
	if err != nil {
		return nil
	}
	if tc, ok := c.(*net.TCPConn); ok {
		return tc
	}
	c.Close()
	return nil
}

// rights returns the descriptors passed in a control message.
func rights(oob []byte) []int {
	msgs, err := syscall.ParseSocketControlMessage(oob)
	if err != nil {
		return nil
	}
	var fds []int
	for _, m := range msgs {
		if got, err := syscall.ParseUnixRights(&m); err == nil {
			fds = append(fds, got...)
		}
	}
	return fds
}

func closeAll(fds []int) {
	for _, fd := range fds {
		syscall.Close(fd)
	}
}

// prefixConn is a unix connection whose first bytes were read already.
type prefixConn struct {
	*net.UnixConn
	prefix []byte
}

func (c *prefixConn) Read(p []byte) (int, error) {
	if len(c.prefix) > 0 {
		n := copy(p, c.prefix)
		c.prefix = c.prefix[n:]
		return n, nil
	}
	return c.UnixConn.Read(p)
}

var _ io.Reader = (*prefixConn)(nil)
