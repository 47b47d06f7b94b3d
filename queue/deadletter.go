package queue

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/wrenchworks/wrench/task"
)

// Headers set on a dead-lettered task message.
const (
	HeaderDeadReason     = "Wrench-Dead-Reason"
	HeaderDeadDeliveries = "Wrench-Dead-Deliveries"
	HeaderDeadStreamSeq  = "Wrench-Dead-Stream-Seq"
)

// deliveryExceeded is the server's max-deliveries advisory
// (io.nats.jetstream.advisory.v1.max_deliver).
type deliveryExceeded struct {
	Type       string `json:"type"`
	Stream     string `json:"stream"`
	Consumer   string `json:"consumer"`
	StreamSeq  uint64 `json:"stream_seq"`
	Deliveries uint64 `json:"deliveries"`
}

// deadLetter copies a task message (its data and headers) to
// wrench.deadletter.<id> with the reason, delivery count and original stream
// sequence in headers. It is idempotent per stream sequence.
func (c *Conn) deadLetter(ctx context.Context, id string, data []byte, hdr nats.Header, streamSeq uint64, deliveries int, reason string) error {
	msg := &nats.Msg{Subject: DeadLetterSubjectPrefix + id, Data: data, Header: nats.Header{}}
	for k, v := range hdr {
		if k == jetstream.MsgIDHeader || strings.HasPrefix(k, "Nats-") {
			continue
		}
		msg.Header[k] = v
	}
	msg.Header.Set(HeaderDeadReason, reason)
	msg.Header.Set(HeaderDeadDeliveries, strconv.Itoa(deliveries))
	msg.Header.Set(HeaderDeadStreamSeq, strconv.FormatUint(streamSeq, 10))
	msgID := "dl-" + id + "-" + strconv.FormatUint(streamSeq, 10)
	if _, err := c.js.PublishMsg(ctx, msg, jetstream.WithMsgID(msgID), jetstream.WithExpectStream(DeadLetterStream)); err != nil {
		return fmt.Errorf("dead-letter %s: %w", id, err)
	}
	return nil
}

// Buried is what [Work.BuryExhausted] did with one advisory.
type Buried struct {
	// TaskID is the dead task ("" when its message was already gone).
	TaskID string
	// Reason is the failure reason written to its result.
	Reason string
	// Settled is true when this call wrote the failed result (false when
	// the task was already final).
	Settled bool
	// Status is the task's status afterwards.
	Status task.Status
	// Trace, when set, returns its argument with the trace context the
	// task's message carried (as [Delivery.Trace]).
	Trace func(context.Context) context.Context
}

// buryExhausted handles a max-deliveries advisory of the workers consumer:
// the task message is copied to the dead-letter stream, the task gets a
// failed result naming the reason (unless it is already final), a result
// event is published and the message is deleted from the work queue. It is
// idempotent: an advisory whose message is already gone does nothing. A
// message that duplicates a task another message's holder is running
// (written within live) is only deleted: the task is not dead.
func (c *Conn) buryExhausted(ctx context.Context, adv deliveryExceeded, live time.Duration) (Buried, error) {
	if adv.Stream != TasksStream {
		return Buried{}, nil
	}
	m, err := c.tasks.GetMsg(ctx, adv.StreamSeq)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return Buried{}, nil
	}
	if err != nil {
		return Buried{}, fmt.Errorf("read exhausted message %d: %w", adv.StreamSeq, err)
	}
	id := taskIDFromSubject(m.Subject)
	if id == "" {
		if err := c.tasks.DeleteMsg(ctx, adv.StreamSeq); err != nil && !errors.Is(err, jetstream.ErrMsgNotFound) {
			return Buried{}, fmt.Errorf("delete exhausted message %d: %w", adv.StreamSeq, err)
		}
		return Buried{}, nil
	}
	earlier, free := reissueCounts(m.Header)
	charged := earlier - free + int(adv.Deliveries)
	reason := fmt.Sprintf("deliveries exhausted (%d): the worker stopped responding on the last attempt", charged)
	e, err := c.get(ctx, id)
	found := err == nil
	if found && heldElsewhere(&e.st, Claim{Message: adv.StreamSeq, Live: live}, time.Now()) {
		if err := c.tasks.DeleteMsg(ctx, adv.StreamSeq); err != nil && !errors.Is(err, jetstream.ErrMsgNotFound) {
			return Buried{}, fmt.Errorf("delete exhausted duplicate message %d: %w", adv.StreamSeq, err)
		}
		return Buried{}, nil
	}
	if found && e.st.State == task.StateQueued && e.st.Reason != "" {
		reason = fmt.Sprintf("deliveries exhausted (%d): %s", charged, e.st.Reason)
	}
	if err := c.deadLetter(ctx, id, m.Data, m.Header, adv.StreamSeq, int(adv.Deliveries), reason); err != nil {
		return Buried{}, err
	}
	var t *task.Task
	if dt, err := task.Decode(m.Data); err == nil {
		t = &dt
	}
	res := task.Result{Status: task.StateFailed, Reason: reason, Fault: task.FaultInfra, Attempt: earlier + int(adv.Deliveries), HandedBack: free}
	if found {
		res.Usage = spentOf(e.st)
	}
	st, settled, err := c.states.Settle(ctx, id, t, res)
	if err != nil {
		return Buried{}, err
	}
	if settled {
		c.emit(ctx, resultEvent(st))
	}
	if err := c.tasks.DeleteMsg(ctx, adv.StreamSeq); err != nil && !errors.Is(err, jetstream.ErrMsgNotFound) {
		return Buried{}, fmt.Errorf("delete exhausted message %d: %w", adv.StreamSeq, err)
	}
	hdr := m.Header
	trace := func(ctx context.Context) context.Context { return c.extractTrace(ctx, hdr) }
	return Buried{TaskID: id, Reason: reason, Settled: settled, Status: st, Trace: trace}, nil
}

// parseDeliveryExceeded decodes a max-deliveries advisory.
func parseDeliveryExceeded(data []byte) (deliveryExceeded, error) {
	var adv deliveryExceeded
	if err := json.Unmarshal(data, &adv); err != nil {
		return deliveryExceeded{}, fmt.Errorf("decode max-deliveries advisory: %w", err)
	}
	return adv, nil
}

// republish puts a task message on the work queue again as a new message,
// with a fresh delivery count (see [Delivery.Reissue]).
func (c *Conn) republish(ctx context.Context, subject, id string, data []byte, hdr nats.Header, streamSeq uint64) error {
	msg := &nats.Msg{Subject: subject, Data: data, Header: nats.Header{}}
	for k, v := range hdr {
		if !strings.HasPrefix(k, "Nats-") {
			msg.Header[k] = v
		}
	}
	msgID := id + "-r" + strconv.FormatUint(streamSeq, 10)
	if _, err := c.js.PublishMsg(ctx, msg, jetstream.WithMsgID(msgID), jetstream.WithExpectStream(TasksStream)); err != nil {
		return fmt.Errorf("republish %s: %w", id, err)
	}
	return nil
}
