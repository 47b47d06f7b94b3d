package shim

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"sync"

	"github.com/wrenchworks/wrench/sandbox"
)

// ErrClosed is matched by errors of calls made on, or cut short by, a
// stream that has ended.
var ErrClosed = errors.New("shim stream closed")

// Client talks to a [Serve] at the other end of a stream. It is safe for
// concurrent use; calls are multiplexed on the one stream.
type Client struct {
	conn io.ReadWriteCloser

	wmu sync.Mutex // serialises frames on conn

	mu      sync.Mutex
	pending map[uint64]chan *Response
	nextID  uint64
	err     error // set once the read loop ended

	hello     *Hello
	helloDone chan struct{}
	done      chan struct{}
	closeOnce sync.Once
}

// NewClient starts reading responses from conn. The caller must call
// [Client.Close], which closes conn and waits for the reader.
func NewClient(conn io.ReadWriteCloser) *Client {
	c := &Client{
		conn:      conn,
		pending:   map[uint64]chan *Response{},
		helloDone: make(chan struct{}),
		done:      make(chan struct{}),
	}
	go c.readLoop()
	return c
}

func (c *Client) readLoop() {
	defer close(c.done)
	br := bufio.NewReaderSize(c.conn, 64<<10)
	var err error
	for {
		resp := new(Response)
		if err = readFrame(br, resp); err != nil {
			break
		}
		if resp.ID == 0 {
			if resp.Hello != nil && c.hello == nil {
				c.hello = resp.Hello
				close(c.helloDone)
			}
			continue
		}
		c.mu.Lock()
		ch := c.pending[resp.ID]
		delete(c.pending, resp.ID)
		c.mu.Unlock()
		if ch != nil {
			ch <- resp // buffered
		}
	}
	if errors.Is(err, io.EOF) {
		err = ErrClosed
	} else {
		err = fmt.Errorf("%w: %w", ErrClosed, err)
	}
	c.mu.Lock()
	c.err = err
	for id, ch := range c.pending {
		close(ch)
		delete(c.pending, id)
	}
	c.mu.Unlock()
}

// Ready waits for the server's hello frame and checks its version.
func (c *Client) Ready(ctx context.Context) (*Hello, error) {
	select {
	case <-c.helloDone:
	case <-c.done:
		select {
		case <-c.helloDone: // hello arrived just before the end
		default:
			return nil, fmt.Errorf("wait for shim hello: %w", c.Err())
		}
	case <-ctx.Done():
		return nil, fmt.Errorf("wait for shim hello: %w", ctx.Err())
	}
	if c.hello.Version != ProtocolVersion {
		return nil, fmt.Errorf("shim speaks protocol %d, want %d", c.hello.Version, ProtocolVersion)
	}
	return c.hello, nil
}

// Done is closed when the stream has ended.
func (c *Client) Done() <-chan struct{} { return c.done }

// Err says why the stream ended, or nil while it is open.
func (c *Client) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// Close closes the stream and waits for the reader to stop. Calls in
// flight fail with an error matching ErrClosed.
func (c *Client) Close() error {
	var err error
	c.closeOnce.Do(func() { err = c.conn.Close() })
	<-c.done
	return err
}

// call sends req and waits for its response, or for ctx, in which case
// the server is told to cancel the request.
func (c *Client) call(ctx context.Context, req *Request) (*Response, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	ch := make(chan *Response, 1)
	c.mu.Lock()
	c.nextID++
	req.ID = c.nextID
	c.mu.Unlock()
	frame, err := encodeFrame(req)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", req.Op, err) // not sent; the stream is fine
	}
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		return nil, c.err
	}
	c.pending[req.ID] = ch
	c.mu.Unlock()

	if err := c.write(frame); err != nil {
		c.forget(req.ID)
		return nil, fmt.Errorf("%w: send %s: %w", ErrClosed, req.Op, err)
	}
	select {
	case resp, ok := <-ch:
		if !ok {
			return nil, c.Err()
		}
		if resp.Error != nil {
			return nil, resp.Error
		}
		return resp, nil
	case <-ctx.Done():
		c.forget(req.ID)
		if frame, err := encodeFrame(&Request{Op: OpCancel, Target: req.ID}); err == nil {
			c.write(frame) // best effort
		}
		return nil, ctx.Err()
	}
}

func (c *Client) forget(id uint64) {
	c.mu.Lock()
	delete(c.pending, id)
	c.mu.Unlock()
}

func (c *Client) write(frame []byte) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	_, err := c.conn.Write(frame)
	return err
}

// Ping does one round trip.
func (c *Client) Ping(ctx context.Context) error {
	_, err := c.call(ctx, &Request{Op: OpPing})
	return err
}

// Exec runs req.Command with the server's shell, with env added to the
// server's base environment.
func (c *Client) Exec(ctx context.Context, req sandbox.ExecRequest, env map[string]string) (sandbox.ExecResult, error) {
	resp, err := c.call(ctx, execRequestFrame(req, env))
	if err != nil {
		return sandbox.ExecResult{}, err
	}
	if resp.Exec == nil {
		return sandbox.ExecResult{}, emptyResponse(OpExec)
	}
	return execResultOf(resp.Exec), nil
}

// ReadFile returns a file's contents.
func (c *Client) ReadFile(ctx context.Context, path string) ([]byte, error) {
	resp, err := c.call(ctx, &Request{Op: OpRead, Path: path})
	if err != nil {
		return nil, err
	}
	if resp.Data == nil {
		return []byte{}, nil
	}
	return resp.Data, nil
}

// WriteFile writes a file, creating parents; mode 0 keeps an existing
// file's mode (0644 for a new one).
func (c *Client) WriteFile(ctx context.Context, path string, data []byte, mode fs.FileMode) error {
	_, err := c.call(ctx, &Request{Op: OpWrite, Path: path, Data: data, Mode: uint32(mode.Perm())})
	return err
}

// Remove deletes a file (not a directory).
func (c *Client) Remove(ctx context.Context, path string) error {
	_, err := c.call(ctx, &Request{Op: OpRemove, Path: path})
	return err
}

// Stat describes a file, following symbolic links inside the workspace.
func (c *Client) Stat(ctx context.Context, path string) (sandbox.FileInfo, error) {
	resp, err := c.call(ctx, &Request{Op: OpStat, Path: path})
	if err != nil {
		return sandbox.FileInfo{}, err
	}
	if resp.Info == nil {
		return sandbox.FileInfo{}, emptyResponse(OpStat)
	}
	return fileInfoOf(*resp.Info), nil
}

// ListDir lists one directory sorted by name.
func (c *Client) ListDir(ctx context.Context, path string) ([]sandbox.FileInfo, error) {
	resp, err := c.call(ctx, &Request{Op: OpList, Path: path})
	if err != nil {
		return nil, err
	}
	return fileInfosOf(resp.Infos), nil
}

// Glob returns workspace-relative paths under dir matching pattern.
func (c *Client) Glob(ctx context.Context, pattern, dir string) ([]string, error) {
	resp, err := c.call(ctx, &Request{Op: OpGlob, Pattern: pattern, Path: dir})
	if err != nil {
		return nil, err
	}
	if resp.Paths == nil {
		return []string{}, nil
	}
	return resp.Paths, nil
}

// Grep searches for a regular expression.
func (c *Client) Grep(ctx context.Context, req sandbox.GrepRequest) ([]sandbox.GrepMatch, error) {
	resp, err := c.call(ctx, grepRequestFrame(req))
	if err != nil {
		return nil, err
	}
	return grepMatchesOf(resp.Matches), nil
}

// Usage returns the bytes of disk used under the workspace.
func (c *Client) Usage(ctx context.Context) (int64, error) {
	resp, err := c.call(ctx, &Request{Op: OpUsage})
	if err != nil {
		return 0, err
	}
	return resp.Bytes, nil
}
