package workspace

import (
	"context"
	"io"
)

type progressKey struct{}

// WithProgress returns a context under which clones and fetches from a
// remote write the server's progress messages to w, as git prints them
// ("Receiving objects:  45% (450/1000)", stages separated by "\r" or
// "\n"). Without it, fetches ask the server for no progress. Local copies
// have none.
func WithProgress(ctx context.Context, w io.Writer) context.Context {
	return context.WithValue(ctx, progressKey{}, w)
}

// ProgressOf is the writer WithProgress set, or nil: what a clone or fetch
// reports its progress to.
func ProgressOf(ctx context.Context) io.Writer {
	w, _ := ctx.Value(progressKey{}).(io.Writer)
	return w
}
