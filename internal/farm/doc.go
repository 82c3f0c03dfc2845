// Package farm is metalprove's proving farm on NATS JetStream: proofs spread over any number of
// worker processes on any number of hosts, with JetStream as the queue and the store. It owns
// the farm's records (Job, Status: versioned JSON), the names and limits of the JetStream stream,
// consumer and buckets it creates on first use (names.go), the connection to a server with its
// timeouts (Connect), the client side (Submit, Statuses, Queue, ReadProof: what `metalprove
// submit`, `jobs` and `fetch` do) and the worker (Worker: what `metalprove worker` runs).
//
// A job travels so: Submit stores the proving key in the object store under its SHA-256 (once
// for all the jobs of that key) and the trace under the job's id, writes the job's status
// (queued) in the status bucket, and publishes the job record on the work-queue stream. A worker
// pulls it from the durable consumer, marks it proving, fetches the key (cached per worker by its
// digest) and the trace, proves through the app layer (prover.Prove), stores the proof under the
// job's id, marks the job done, and only then acknowledges the message; while it proves it sends
// in-progress acknowledgements so that a slow proof is not redelivered. A worker that dies
// leaves its message unacknowledged: JetStream redelivers it after the ack wait to another
// worker. Proofs are deterministic, so a job proved twice stores the same bytes under the same
// name: one proof per job whatever happens. A job that cannot succeed (a malformed trace, a key
// that does not fit it, a key missing from the store, a payload over the limits, a record that
// does not decode) is terminated with its reason recorded in its status; a job delivered more
// than MaxAttempts times is terminated too, so that no message stalls the queue.
//
// It sits in the app layer beside internal/prover, which does the proving; nothing here imports a
// command.
package farm
