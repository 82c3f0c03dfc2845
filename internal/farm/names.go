package farm

import "time"

// The JetStream names of the farm. Submit and the workers create what is missing on first use,
// with the limits below (and Options.Replicas); what exists already is used as it is, so an
// operator may create them beforehand with other limits (docs/SCALE-OUT.md).
const (
	// JobStream is the work-queue stream of job records (Job), one message per job; a message
	// leaves the stream when a worker acknowledges or terminates it.
	JobStream = "METALPROVE_JOBS"
	// JobSubject is the subject jobs are published on.
	JobSubject = "metalprove.jobs"
	// WorkerConsumer is the durable pull consumer every worker pulls jobs from.
	WorkerConsumer = "metalprove-workers"
	// StatusBucket is the key-value bucket of job statuses (Status), keyed by job id.
	StatusBucket = "metalprove-status"
	// BlobBucket is the object store of payloads: proving keys under KeyObjectPrefix + their
	// SHA-256 (hex), traces under TraceObjectPrefix + the job id (deleted once the job ends), and
	// proofs under ProofObjectPrefix + the job id (kept).
	BlobBucket = "metalprove-blobs"

	KeyObjectPrefix   = "keys/"
	TraceObjectPrefix = "traces/"
	ProofObjectPrefix = "proofs/"
)

// Limits of the stream, the buckets and the payloads.
const (
	// MaxQueuedJobs bounds the jobs waiting in JobStream; a submit beyond it fails (the stream
	// discards new messages, never queued ones).
	MaxQueuedJobs = 100_000
	// MaxRecordBytes bounds a job record (a message of JobStream) and a status record.
	MaxRecordBytes = 64 << 10
	// DuplicateWindow is how long JobStream remembers a job id: a job published twice within it
	// (a submit retried after a lost answer) is queued once.
	DuplicateWindow = 10 * time.Minute
	// MaxTraceBytes bounds a trace file: submit refuses a larger one, and a worker terminates a
	// job whose stored trace is larger.
	MaxTraceBytes = 2 << 30
	// MaxKeyBytes bounds a proving-key file likewise.
	MaxKeyBytes = 256 << 20
)

// Timings and retries.
const (
	// AckWait is how long JetStream waits for a worker's acknowledgement of a job before it
	// delivers the job again (to any worker).
	AckWait = 30 * time.Second
	// Heartbeat is how often a worker tells JetStream that a job is still in progress (an
	// in-progress acknowledgement restarts the ack wait): a proof may take longer than AckWait.
	Heartbeat = AckWait / 3
	// MaxJobTime bounds one attempt at a job: a proof still running after it (a device that
	// hangs) is stopped and its heartbeat with it, and the job is given back to be tried again.
	MaxJobTime = time.Hour
	// MaxAttempts is how many deliveries of a job a worker takes up: a job delivered more often
	// (its workers crashed on it, were killed, or timed out) is terminated as failed.
	MaxAttempts = 5
	// MaxDeliver is the consumer's own bound on deliveries: beyond MaxAttempts, so that a worker
	// always sees the delivery it terminates; it keeps the bound if workers misbehave.
	MaxDeliver = MaxAttempts + 2
	// RetryFor is how long a worker keeps retrying to store a proof, a status or an
	// acknowledgement while the server is unreachable (restarting, failing over) before it gives
	// the job up to redelivery.
	RetryFor = 2 * time.Minute
	// ConnectTimeout bounds the connection to a server; RequestTimeout each JetStream request.
	ConnectTimeout = 5 * time.Second
	RequestTimeout = 10 * time.Second
	// FetchWait is how long one pull for jobs waits for a job before it asks again.
	FetchWait = 2 * time.Second
)

// Options tune a connection to the farm: the defaults are the constants above; tests shorten
// the timings.
type Options struct {
	// Replicas is the replica count of what Connect creates (1 for a single server; 3 in a
	// three-node cluster). What exists already keeps its own.
	Replicas int
	// AckWait, Heartbeat, MaxJobTime, MaxAttempts: as the constants; the workers' consumer takes
	// AckWait and MaxAttempts+2 deliveries when a worker creates or updates it.
	AckWait     time.Duration
	Heartbeat   time.Duration
	MaxJobTime  time.Duration
	MaxAttempts int
	// MaxTraceBytes and MaxKeyBytes bound the payloads (submit and worker).
	MaxTraceBytes int64
	MaxKeyBytes   int64
	// RetryFor, ConnectTimeout, RequestTimeout, FetchWait: as the constants.
	RetryFor       time.Duration
	ConnectTimeout time.Duration
	RequestTimeout time.Duration
	FetchWait      time.Duration
	// ReconnectWait is the pause between attempts to reconnect to a server that went away.
	ReconnectWait time.Duration
}

// DefaultOptions are the documented names' values.
func DefaultOptions() Options {
	return Options{
		Replicas:       1,
		AckWait:        AckWait,
		Heartbeat:      Heartbeat,
		MaxJobTime:     MaxJobTime,
		MaxAttempts:    MaxAttempts,
		MaxTraceBytes:  MaxTraceBytes,
		MaxKeyBytes:    MaxKeyBytes,
		RetryFor:       RetryFor,
		ConnectTimeout: ConnectTimeout,
		RequestTimeout: RequestTimeout,
		FetchWait:      FetchWait,
		ReconnectWait:  time.Second,
	}
}
