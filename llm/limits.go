package llm

import (
	"bytes"
	"fmt"
	"io"
	"net/http"

	"github.com/openai/openai-go/v3/option"
)

// wireFactor is how many times MaxReplyBytes a streamed reply may take on
// the wire: every server-sent event repeats the completion's id, model and
// framing around a delta of a few bytes.
const wireFactor = 8

// replyTooLargeError ends a reply that went past a cap.
type replyTooLargeError struct {
	what  string
	limit int64
}

func (e *replyTooLargeError) Error() string {
	return fmt.Sprintf("the reply exceeds the cap of %s on %s (llm.Config.MaxReplyBytes)", byteSize(e.limit), e.what)
}

// byteSize formats n bytes for a message.
func byteSize(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}

// capBody returns a request option that bounds the response body of one
// attempt: a streamed body to wireFactor·max bytes and max bytes per line
// (one event), a whole body to max bytes. Reading past a bound fails with
// *replyTooLargeError, so neither the SDK's buffers nor ours outgrow it.
func capBody(max int64, streaming bool) option.RequestOption {
	return option.WithMiddleware(func(req *http.Request, next option.MiddlewareNext) (*http.Response, error) {
		resp, err := next(req)
		if err != nil || resp == nil || resp.Body == nil {
			return resp, err
		}
		cb := &cappedBody{rc: resp.Body, max: max}
		if streaming {
			cb.max, cb.maxLine = wireFactor*max, max
		}
		resp.Body = cb
		return resp, nil
	})
}

// cappedBody is a response body with a total and a per-line bound.
type cappedBody struct {
	rc      io.ReadCloser
	max     int64 // bytes in all
	maxLine int64 // bytes between newlines; 0: no bound
	read    int64
	line    int64
	err     error
}

func (b *cappedBody) Read(p []byte) (int, error) {
	if b.err != nil {
		return 0, b.err
	}
	n, err := b.rc.Read(p)
	b.read += int64(n)
	if b.read > b.max {
		b.err = &replyTooLargeError{what: "the bytes received", limit: b.max}
		return 0, b.err
	}
	if b.maxLine > 0 && b.longLine(p[:n]) {
		b.err = &replyTooLargeError{what: "one streamed event", limit: b.maxLine}
		return 0, b.err
	}
	return n, err
}

// longLine follows the current line's length through p and reports
// whether a line went past maxLine.
func (b *cappedBody) longLine(p []byte) bool {
	for {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			b.line += int64(len(p))
			return b.line > b.maxLine
		}
		if b.line+int64(i) > b.maxLine {
			return true
		}
		b.line, p = 0, p[i+1:]
	}
}

func (b *cappedBody) Close() error { return b.rc.Close() }
