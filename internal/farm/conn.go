package farm

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/metalprove/metalprove/internal/cmdutil"
)

// Farm is a connection to the farm's JetStream server (or cluster) with its stream and buckets
// bound.
type Farm struct {
	// URL is the server URL as given, its passwords redacted: what messages name.
	URL    string
	opts   Options
	nc     *nats.Conn
	js     jetstream.JetStream
	jobs   jetstream.Stream
	status jetstream.KeyValue
	blobs  jetstream.ObjectStore
}

// Connect connects to the NATS server at serverURL (a URL or a comma-separated list of the
// URLs of a cluster's servers), checks that it has JetStream, and binds JobStream, StatusBucket
// and BlobBucket, creating those that do not exist. A server that does not answer within
// opts.ConnectTimeout is an error naming the URL; once connected, the connection is kept through
// server restarts (reconnecting every opts.ReconnectWait). name names the client to the server
// (its monitoring shows it). extra are further nats options (tests).
func Connect(ctx context.Context, serverURL, name string, opts Options, extra ...nats.Option) (*Farm, error) {
	shown := RedactURL(serverURL)
	if strings.TrimSpace(serverURL) == "" {
		return nil, errors.New("no NATS server URL (--nats nats://HOST:4222)")
	}
	nopts := []nats.Option{
		nats.Name(name),
		nats.Timeout(opts.ConnectTimeout),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(opts.ReconnectWait),
		nats.ReconnectJitter(opts.ReconnectWait/10, opts.ReconnectWait/10),
	}
	nc, err := nats.Connect(serverURL, append(nopts, extra...)...)
	if err != nil {
		return nil, fmt.Errorf("NATS server %s: cannot connect: %w", shown, err)
	}
	f := &Farm{URL: shown, opts: opts, nc: nc}
	if err := f.bind(ctx); err != nil {
		nc.Close()
		return nil, err
	}
	return f, nil
}

// Dial connects a command to the farm at serverURL (its --nats) with the default options and
// replicas for what it creates. A missing URL is a UsageError.
func Dial(ctx context.Context, serverURL, client string, replicas int) (*Farm, error) {
	if strings.TrimSpace(serverURL) == "" {
		return nil, cmdutil.Usagef("--nats is required: the URL of the farm's NATS server (nats://HOST:4222)")
	}
	if replicas < 1 || replicas > 5 {
		return nil, cmdutil.Usagef("--replicas %d: must be in [1, 5]", replicas)
	}
	o := DefaultOptions()
	o.Replicas = replicas
	return Connect(ctx, serverURL, client, o)
}

// CheckJobIDs checks job ids given as arguments: a malformed one is a UsageError.
func CheckJobIDs(ids []string) error {
	for _, id := range ids {
		if err := CheckJobID(id); err != nil {
			return cmdutil.Usagef("%v", err)
		}
	}
	return nil
}

// Close closes the connection after sending what is buffered (acknowledgements included).
func (f *Farm) Close() {
	_ = f.nc.FlushTimeout(f.opts.RequestTimeout)
	f.nc.Close()
}

// Options are the options the farm was connected with.
func (f *Farm) Options() Options { return f.opts }

// RedactURL is serverURL with the credentials of each of its URLs replaced by "xxxxx": the
// password of user:password, or the whole user part (a token).
func RedactURL(serverURL string) string {
	parts := strings.Split(serverURL, ",")
	for i, p := range parts {
		u, err := url.Parse(strings.TrimSpace(p))
		if err != nil || u.User == nil {
			continue
		}
		if _, has := u.User.Password(); has {
			u.User = url.UserPassword(u.User.Username(), "xxxxx")
		} else {
			u.User = url.User("xxxxx")
		}
		parts[i] = u.String()
	}
	return strings.Join(parts, ",")
}

// request is a context for one JetStream request: ctx bounded by RequestTimeout.
func (f *Farm) request(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, f.opts.RequestTimeout)
}

// bind checks JetStream and binds (or creates) the stream and the buckets.
func (f *Farm) bind(ctx context.Context) error {
	js, err := jetstream.New(f.nc, jetstream.WithDefaultTimeout(f.opts.RequestTimeout))
	if err != nil {
		return fmt.Errorf("NATS server %s: %w", f.URL, err)
	}
	f.js = js
	rctx, cancel := f.request(ctx)
	defer cancel()
	if _, err := js.AccountInfo(rctx); err != nil {
		if errors.Is(err, jetstream.ErrJetStreamNotEnabled) || errors.Is(err, jetstream.ErrJetStreamNotEnabledForAccount) {
			return fmt.Errorf("NATS server %s has no JetStream (start nats-server with -js): %w", f.URL, err)
		}
		return fmt.Errorf("NATS server %s: JetStream does not answer: %w", f.URL, err)
	}
	if f.jobs, err = f.bindStream(rctx); err != nil {
		return fmt.Errorf("NATS server %s: stream %s: %w", f.URL, JobStream, err)
	}
	if f.status, err = f.bindStatus(rctx); err != nil {
		return fmt.Errorf("NATS server %s: key-value bucket %s: %w", f.URL, StatusBucket, err)
	}
	if f.blobs, err = f.bindBlobs(rctx); err != nil {
		return fmt.Errorf("NATS server %s: object store %s: %w", f.URL, BlobBucket, err)
	}
	return nil
}

// JobStreamConfig is the configuration JobStream is created with.
func JobStreamConfig(replicas int) jetstream.StreamConfig {
	return jetstream.StreamConfig{
		Name:        JobStream,
		Description: "metalprove proving jobs (docs/SCALE-OUT.md)",
		Subjects:    []string{JobSubject},
		Retention:   jetstream.WorkQueuePolicy,
		Storage:     jetstream.FileStorage,
		Discard:     jetstream.DiscardNew,
		MaxMsgs:     MaxQueuedJobs,
		MaxMsgSize:  MaxRecordBytes,
		Duplicates:  DuplicateWindow,
		Replicas:    replicas,
	}
}

// bindOrCreate binds what get finds; when it is not found (notFound), it creates it, binding
// what another client created meanwhile (exists).
func bindOrCreate[T any](get, create func() (T, error), notFound, exists error) (T, error) {
	v, err := get()
	if errors.Is(err, notFound) {
		if v, err = create(); errors.Is(err, exists) {
			v, err = get()
		}
	}
	return v, err
}

func (f *Farm) bindStream(ctx context.Context) (jetstream.Stream, error) {
	return bindOrCreate(
		func() (jetstream.Stream, error) { return f.js.Stream(ctx, JobStream) },
		func() (jetstream.Stream, error) { return f.js.CreateStream(ctx, JobStreamConfig(f.opts.Replicas)) },
		jetstream.ErrStreamNotFound, jetstream.ErrStreamNameAlreadyInUse)
}

func (f *Farm) bindStatus(ctx context.Context) (jetstream.KeyValue, error) {
	return bindOrCreate(
		func() (jetstream.KeyValue, error) { return f.js.KeyValue(ctx, StatusBucket) },
		func() (jetstream.KeyValue, error) {
			return f.js.CreateKeyValue(ctx, jetstream.KeyValueConfig{
				Bucket:       StatusBucket,
				Description:  "metalprove job statuses by job id (docs/SCALE-OUT.md)",
				History:      1,
				MaxValueSize: MaxRecordBytes,
				Storage:      jetstream.FileStorage,
				Replicas:     f.opts.Replicas,
			})
		},
		jetstream.ErrBucketNotFound, jetstream.ErrBucketExists)
}

func (f *Farm) bindBlobs(ctx context.Context) (jetstream.ObjectStore, error) {
	return bindOrCreate(
		func() (jetstream.ObjectStore, error) { return f.js.ObjectStore(ctx, BlobBucket) },
		func() (jetstream.ObjectStore, error) {
			return f.js.CreateObjectStore(ctx, jetstream.ObjectStoreConfig{
				Bucket:      BlobBucket,
				Description: "metalprove proving keys, traces and proofs (docs/SCALE-OUT.md)",
				Storage:     jetstream.FileStorage,
				Replicas:    f.opts.Replicas,
			})
		},
		jetstream.ErrBucketNotFound, jetstream.ErrBucketExists)
}

// consumerConfig is the workers' consumer: explicit acknowledgements within AckWait, at most
// MaxAttempts+2 deliveries.
func (f *Farm) consumerConfig() jetstream.ConsumerConfig {
	return jetstream.ConsumerConfig{
		Durable:       WorkerConsumer,
		Description:   "metalprove workers (docs/SCALE-OUT.md)",
		FilterSubject: JobSubject,
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       f.opts.AckWait,
		MaxDeliver:    f.opts.MaxAttempts + 2,
		DeliverPolicy: jetstream.DeliverAllPolicy,
	}
}

// workerConsumer creates the workers' consumer, or updates its ack wait and delivery bound.
func (f *Farm) workerConsumer(ctx context.Context) (jetstream.Consumer, error) {
	rctx, cancel := f.request(ctx)
	defer cancel()
	c, err := f.js.CreateOrUpdateConsumer(rctx, JobStream, f.consumerConfig())
	if err != nil {
		return nil, fmt.Errorf("NATS server %s: consumer %s of stream %s: %w", f.URL, WorkerConsumer, JobStream, err)
	}
	return c, nil
}

// retry runs op until it succeeds, ctx is done or opts.RetryFor has passed, pausing between
// attempts (a server restarting answers again within seconds). It returns op's last error.
func (f *Farm) retry(ctx context.Context, op func(ctx context.Context) error) error {
	deadline := time.Now().Add(f.opts.RetryFor)
	pause := 100 * time.Millisecond
	for {
		rctx, cancel := f.request(ctx)
		err := op(rctx)
		cancel()
		if err == nil || errors.Is(err, errPermanent) {
			return err
		}
		if ctx.Err() != nil || time.Now().Add(pause).After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(pause):
		}
		pause = min(2*pause, 2*time.Second)
	}
}

// errPermanent marks an error retry does not retry.
var errPermanent = errors.New("permanent")
