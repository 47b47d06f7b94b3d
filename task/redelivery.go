package task

import "context"

// Redelivery is what a later attempt of a task is told about the earlier
// ones: why the last one ended and what they spent.
type Redelivery struct {
	// Cause says why the last attempt ended without a result ("worker w1
	// stopped responding on attempt 1", "worker shutdown: handed back", …);
	// empty on a first attempt.
	Cause string
	// Spent is the model use of the earlier attempts (Status.Spent).
	Spent Usage
}

type redeliveryKey struct{}

// WithRedelivery returns ctx carrying r, for the runner of a later attempt.
func WithRedelivery(ctx context.Context, r Redelivery) context.Context {
	return context.WithValue(ctx, redeliveryKey{}, r)
}

// RedeliveryOf returns the Redelivery WithRedelivery put in ctx (zero when
// none).
func RedeliveryOf(ctx context.Context) Redelivery {
	r, _ := ctx.Value(redeliveryKey{}).(Redelivery)
	return r
}
