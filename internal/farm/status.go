package farm

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// ErrNoSuchJob is the error of a job id the status bucket does not know.
var ErrNoSuchJob = errors.New("no such job")

// Status reads the status of job id (ErrNoSuchJob when there is none).
func (f *Farm) Status(ctx context.Context, id string) (*Status, error) {
	if err := CheckJobID(id); err != nil {
		return nil, err
	}
	rctx, cancel := f.request(ctx)
	defer cancel()
	e, err := f.status.Get(rctx, id)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, fmt.Errorf("job %s: %w", id, ErrNoSuchJob)
	}
	if err != nil {
		return nil, fmt.Errorf("job %s: reading its status from %s: %w", id, f.URL, err)
	}
	return decodeStatus(id, e.Value())
}

// Statuses reads the status of every job, oldest submission first.
func (f *Farm) Statuses(ctx context.Context) ([]*Status, error) {
	rctx, cancel := f.request(ctx)
	defer cancel()
	w, err := f.status.WatchAll(rctx, jetstream.IgnoreDeletes())
	if err != nil {
		return nil, fmt.Errorf("listing jobs on %s: %w", f.URL, err)
	}
	defer w.Stop()
	var out []*Status
	for {
		select {
		case <-rctx.Done():
			return nil, fmt.Errorf("listing jobs on %s: %w", f.URL, rctx.Err())
		case e := <-w.Updates():
			if e == nil { // every status read
				slices.SortFunc(out, func(a, b *Status) int {
					if c := a.SubmittedAt.Compare(b.SubmittedAt); c != 0 {
						return c
					}
					return strings.Compare(a.ID, b.ID)
				})
				return out, nil
			}
			st, err := decodeStatus(e.Key(), e.Value())
			if err != nil {
				return nil, err
			}
			out = append(out, st)
		}
	}
}

// updateStatus changes the status of job id by change, atomically: change sees the current
// status (a new one of state queued when there is none) and returns false to leave it as it
// is. A concurrent writer makes it read and change again. It returns the status as it stands.
func (f *Farm) updateStatus(ctx context.Context, id string, change func(*Status) bool) (*Status, error) {
	for {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("job %s: writing its status: %w", id, err)
		}
		rctx, cancel := f.request(ctx)
		st, rev, err := f.readStatus(rctx, id)
		if err != nil {
			cancel()
			return nil, err
		}
		if !change(st) {
			cancel()
			return st, nil
		}
		st.Version, st.ID, st.UpdatedAt = StatusVersion, id, time.Now().UTC()
		b, err := encodeStatus(st)
		if err == nil {
			if rev == 0 {
				_, err = f.status.Create(rctx, id, b)
			} else {
				_, err = f.status.Update(rctx, id, b, rev)
			}
		}
		cancel()
		if errors.Is(err, jetstream.ErrKeyExists) {
			continue // written meanwhile: read it again
		}
		if err != nil {
			return nil, fmt.Errorf("job %s: writing its status to %s: %w", id, f.URL, err)
		}
		return st, nil
	}
}

// readStatus reads the status of id and its revision (0 and a new queued status when none).
func (f *Farm) readStatus(ctx context.Context, id string) (*Status, uint64, error) {
	e, err := f.status.Get(ctx, id)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return &Status{Version: StatusVersion, ID: id, State: StateQueued}, 0, nil
	}
	if err != nil {
		return nil, 0, fmt.Errorf("job %s: reading its status from %s: %w", id, f.URL, err)
	}
	st, err := decodeStatus(id, e.Value())
	if err != nil {
		return nil, 0, fmt.Errorf("%w: %w", errPermanent, err)
	}
	return st, e.Revision(), nil
}

// QueueInfo is the state of the job queue: JobStream and the workers' consumer.
type QueueInfo struct {
	// Messages are the job records in JobStream: not yet acknowledged or terminated.
	Messages uint64 `json:"messages"`
	// Waiting are the jobs no worker has taken yet, InFlight those delivered to a worker and not
	// yet acknowledged, Redelivered those among them delivered more than once (consumer counts;
	// 0 before any worker has created the consumer).
	Waiting     uint64 `json:"waiting"`
	InFlight    int    `json:"in_flight"`
	Redelivered int    `json:"redelivered"`
	// Pulling is the number of pull requests of idle workers waiting for a job.
	Pulling int `json:"pulling"`
	// Consumer reports that the workers' consumer exists (a worker has started).
	Consumer bool `json:"consumer"`
}

// Queue reads the state of the job queue.
func (f *Farm) Queue(ctx context.Context) (*QueueInfo, error) {
	rctx, cancel := f.request(ctx)
	defer cancel()
	si, err := f.jobs.Info(rctx)
	if err != nil {
		return nil, fmt.Errorf("stream %s on %s: %w", JobStream, f.URL, err)
	}
	q := &QueueInfo{Messages: si.State.Msgs, Waiting: si.State.Msgs}
	c, err := f.js.Consumer(rctx, JobStream, WorkerConsumer)
	if errors.Is(err, jetstream.ErrConsumerNotFound) {
		return q, nil
	}
	if err != nil {
		return nil, fmt.Errorf("consumer %s on %s: %w", WorkerConsumer, f.URL, err)
	}
	ci, err := c.Info(rctx)
	if err != nil {
		return nil, fmt.Errorf("consumer %s on %s: %w", WorkerConsumer, f.URL, err)
	}
	q.Consumer = true
	q.Waiting, q.InFlight, q.Redelivered, q.Pulling = ci.NumPending, ci.NumAckPending, ci.NumRedelivered, ci.NumWaiting
	return q, nil
}
