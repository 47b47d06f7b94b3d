package queue

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/wrenchworks/wrench/task"
)

// Each tenant has its own subjects on the task stream and its own durable
// consumer, so that a dispatcher can take the next task of whichever tenant
// is due (round robin) instead of the oldest of all: a burst of one
// tenant's tasks waits behind nobody else's.
//
// The default tenant keeps the subjects every task had before tenants
// (wrench.tasks.<id>) and the consumer "wrench-workers", so a deployment
// that names no tenants is laid out as before and tasks queued before the
// upgrade are the default tenant's. Another tenant's tasks are published on
// wrench.tasks.<tenant>.<id> and consumed by "wrench-workers-<tenant>"
// (filter wrench.tasks.<tenant>.*); the default consumer's filter is
// wrench.tasks.* (one token after the prefix), so that no two consumers of
// the work-queue stream overlap.

// TaskSubject is the subject a task of tenant is published on.
func TaskSubject(tenant, id string) string {
	if tenant == "" || tenant == task.DefaultTenant {
		return TaskSubjectPrefix + id
	}
	return TaskSubjectPrefix + tenant + "." + id
}

// TenantConsumer is the durable consumer of tenant's tasks.
func TenantConsumer(tenant string) string {
	if tenant == "" || tenant == task.DefaultTenant {
		return WorkersConsumer
	}
	return WorkersConsumer + "-" + tenant
}

// tenantFilter is the filter subject of tenant's consumer.
func tenantFilter(tenant string) string {
	if tenant == "" || tenant == task.DefaultTenant {
		return TaskSubjectPrefix + "*"
	}
	return TaskSubjectPrefix + tenant + ".*"
}

// tenantOfConsumer is the tenant whose consumer name is; false for a
// consumer that is not a tenant's.
func tenantOfConsumer(name string) (string, bool) {
	if name == WorkersConsumer {
		return task.DefaultTenant, true
	}
	t, ok := strings.CutPrefix(name, WorkersConsumer+"-")
	return t, ok && task.ValidTenant(t) && t != task.DefaultTenant
}

// parseTaskSubject returns the tenant and the task id of a task subject
// (id "" when it names no valid id).
func parseTaskSubject(subject string) (tenant, id string) {
	rest, ok := strings.CutPrefix(subject, TaskSubjectPrefix)
	if !ok {
		return "", ""
	}
	tenant = task.DefaultTenant
	if t, i, two := strings.Cut(rest, "."); two {
		if !task.ValidTenant(t) || strings.Contains(i, ".") {
			return "", ""
		}
		tenant, rest = t, i
	}
	if !validID(rest) {
		return tenant, ""
	}
	return tenant, rest
}

// taskIDFromSubject returns the task id of a task subject
// (wrench.tasks.<id> or wrench.tasks.<tenant>.<id>).
func taskIDFromSubject(subject string) string {
	_, id := parseTaskSubject(subject)
	return id
}

// lastTaskMsg is the newest message of task id in the work queue, under
// whichever tenant it was published.
func (c *Conn) lastTaskMsg(ctx context.Context, id string) (*jetstream.RawStreamMsg, error) {
	m, err := c.tasks.GetLastMsgForSubject(ctx, TaskSubjectPrefix+id)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		m, err = c.tasks.GetLastMsgForSubject(ctx, TaskSubjectPrefix+"*."+id)
	}
	return m, err
}

// tenantConsumers remembers which tenants' consumers this connection has
// seen to exist, so a submission checks once per tenant and process.
type tenantConsumers struct {
	mu   sync.Mutex
	seen map[string]bool
}

// ensureTenantConsumer makes sure tenant's consumer exists before one of
// its tasks is published: a message on a subject no consumer filters would
// wait for nobody. A consumer it creates takes the AckWait and MaxDeliver
// of the default consumer (or of this connection's Work.Open); dispatchers
// apply their own when they find it.
func (c *Conn) ensureTenantConsumer(ctx context.Context, tenant string) error {
	if tenant == "" || tenant == task.DefaultTenant {
		return nil
	}
	c.tenantCons.mu.Lock()
	seen := c.tenantCons.seen[tenant]
	c.tenantCons.mu.Unlock()
	if seen {
		return nil
	}
	name := TenantConsumer(tenant)
	_, err := c.tasks.Consumer(ctx, name)
	if errors.Is(err, jetstream.ErrConsumerNotFound) {
		_, err = c.tasks.CreateConsumer(ctx, c.consumerConfig(ctx, tenant, c.work.config(ctx)))
		if errors.Is(err, jetstream.ErrConsumerExists) {
			err = nil
		}
	}
	if err != nil {
		return fmt.Errorf("consumer of tenant %s: %w", tenant, err)
	}
	c.tenantCons.mu.Lock()
	if c.tenantCons.seen == nil {
		c.tenantCons.seen = map[string]bool{}
	}
	c.tenantCons.seen[tenant] = true
	c.tenantCons.mu.Unlock()
	return nil
}

// consumerConfig is the configuration of tenant's consumer with cc.
func (c *Conn) consumerConfig(_ context.Context, tenant string, cc ConsumerConfig) jetstream.ConsumerConfig {
	desc := "Wrench workers"
	if tenant != task.DefaultTenant {
		desc = "Wrench workers: tasks of tenant " + tenant
	}
	return jetstream.ConsumerConfig{
		Durable:       TenantConsumer(tenant),
		Description:   desc,
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       cc.AckWait,
		MaxDeliver:    cc.MaxDeliver,
		FilterSubject: tenantFilter(tenant),
		MaxAckPending: -1,
	}
}

// consumedTenants returns the tenants whose consumer exists (the default
// tenant first, then by name), first making sure every message of the
// work queue has one: when the stream holds more messages than the
// consumers account for, it looks at the subjects, creates the consumer of
// each tenant that has tasks but none (a task published by hand, or by a
// process that could not create it) and removes messages whose subject is
// not a task's, which no consumer would ever deliver.
func (c *Conn) consumedTenants(ctx context.Context) ([]string, error) {
	tenants, accounted, err := c.listTenantConsumers(ctx)
	if err != nil {
		return nil, err
	}
	info, err := c.tasks.Info(ctx)
	if err != nil {
		return nil, fmt.Errorf("read stream %s: %w", TasksStream, err)
	}
	if info.State.Msgs <= accounted {
		return tenants, nil
	}
	if err := c.adoptSubjects(ctx, tenants); err != nil {
		return nil, err
	}
	tenants, _, err = c.listTenantConsumers(ctx)
	return tenants, err
}

// listTenantConsumers lists the tenants with a consumer, and the messages
// those consumers account for (pending and unacknowledged).
func (c *Conn) listTenantConsumers(ctx context.Context) (tenants []string, accounted uint64, err error) {
	tenants = []string{task.DefaultTenant}
	infos := c.tasks.ListConsumers(ctx)
	for info := range infos.Info() {
		t, ok := tenantOfConsumer(info.Name)
		if !ok {
			continue
		}
		accounted += info.NumPending + uint64(info.NumAckPending)
		if t != task.DefaultTenant {
			tenants = append(tenants, t)
		}
	}
	if err := infos.Err(); err != nil {
		return nil, 0, fmt.Errorf("list consumers of %s: %w", TasksStream, err)
	}
	slices.Sort(tenants[1:])
	return tenants, accounted, nil
}

// adoptSubjects gives each tenant with tasks in the stream a consumer, and
// removes the messages on subjects that name no task.
func (c *Conn) adoptSubjects(ctx context.Context, known []string) error {
	info, err := c.tasks.Info(ctx, jetstream.WithSubjectFilter(TaskSubjectPrefix+">"))
	if err != nil {
		return fmt.Errorf("read subjects of %s: %w", TasksStream, err)
	}
	for subject := range info.State.Subjects {
		tenant, id := parseTaskSubject(subject)
		switch {
		case id == "":
			c.log.Warn("removing messages on a subject that names no task", "subject", subject)
			if err := c.tasks.Purge(ctx, jetstream.WithPurgeSubject(subject)); err != nil {
				return fmt.Errorf("remove messages of %s: %w", subject, err)
			}
		case !slices.Contains(known, tenant):
			c.log.Warn("tenant had tasks queued and no consumer; creating it", "tenant", tenant)
			if err := c.ensureTenantConsumer(ctx, tenant); err != nil {
				return err
			}
			known = append(known, tenant)
		}
	}
	return nil
}
