package farm

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/metalprove/metalprove/internal/cmdutil"
	"github.com/metalprove/metalprove/internal/prover"
)

// SubmitRequest are the inputs of Submit: what `metalprove submit` takes from its flags.
type SubmitRequest struct {
	// Key is the proving-key file (metalprove keygen) every trace is proved with.
	Key string
	// Traces are the trace files, one job each.
	Traces []string
	// Airs are the key's AIRs the traces prove ("": all), as prove --airs.
	Airs          string
	AllowInsecure bool
}

// Submitted is one job submitted.
type Submitted struct {
	ID          string `json:"id"`
	Trace       string `json:"trace"`
	TraceBytes  int64  `json:"trace_bytes"`
	TraceSHA256 string `json:"trace_sha256"`
	KeySHA256   string `json:"key_sha256"`
}

// Submit checks the key and the traces, then submits one job per trace: the key stored once
// under its digest (kept when it is there already), each trace stored under its job's id, the
// job's status written (queued) and its record published. Every input is checked before
// anything is stored: the key is read (prover.ReadKey) and each trace's section headers are
// checked against it (names, widths, heights, public value counts), so that a mistake is an
// error here, with the exit status prove would give, rather than a failed job. A trace proving
// wrong in its cells (its constraints) fails on the worker.
func (f *Farm) Submit(ctx context.Context, req SubmitRequest) ([]Submitted, error) {
	if err := checkPayload("--key", req.Key, f.opts.MaxKeyBytes); err != nil {
		return nil, err
	}
	key, err := prover.ReadKey(req.Key, req.AllowInsecure)
	if err != nil {
		return nil, err
	}
	present, err := prover.ParseAirs(req.Airs, len(key.Airs))
	if err != nil {
		return nil, err
	}
	for _, tr := range req.Traces {
		if err := checkPayload("trace", tr, f.opts.MaxTraceBytes); err != nil {
			return nil, err
		}
		h, err := prover.ReadHeaders(tr)
		if err != nil {
			return nil, err
		}
		if err := prover.CheckKeySections(key, tr, h.Sections, present); err != nil {
			return nil, err
		}
	}
	keyObj, err := f.putKey(ctx, req.Key)
	if err != nil {
		return nil, err
	}
	out := make([]Submitted, 0, len(req.Traces))
	for _, tr := range req.Traces {
		id := NewJobID()
		traceObj, err := f.putFile(ctx, TraceObjectPrefix+id, tr)
		if err != nil {
			return out, err
		}
		job := &Job{Version: JobVersion, ID: id, Key: keyObj, Trace: traceObj, TraceName: TraceFileName(tr),
			Airs: req.Airs, AllowInsecure: req.AllowInsecure, SubmittedAt: time.Now().UTC()}
		if err := f.enqueue(ctx, job); err != nil {
			f.deleteObject(ctx, traceObj.Name)
			return out, err
		}
		out = append(out, Submitted{ID: id, Trace: tr, TraceBytes: traceObj.Bytes, TraceSHA256: traceObj.SHA256, KeySHA256: keyObj.SHA256})
	}
	return out, nil
}

// checkPayload checks that path is a regular file of at most limit bytes; flag names it.
func checkPayload(flag, path string, limit int64) error {
	st, err := os.Stat(path)
	switch {
	case err != nil:
		return &cmdutil.BadInputError{Err: fmt.Errorf("%s %s: %w", flag, path, cmdutil.UnwrapPath(err))}
	case !st.Mode().IsRegular():
		return &cmdutil.BadInputError{Err: fmt.Errorf("%s %s: is not a regular file", flag, path)}
	case st.Size() > limit:
		return &cmdutil.BadInputError{Err: fmt.Errorf("%s %s: %d bytes, over the farm's limit of %d bytes", flag, path, st.Size(), limit)}
	}
	return nil
}

// putKey stores a proving-key file under its digest, unless it is stored already.
func (f *Farm) putKey(ctx context.Context, path string) (Object, error) {
	sum, size, err := fileDigest(path)
	if err != nil {
		return Object{}, &cmdutil.BadInputError{Err: fmt.Errorf("--key %s: %w", path, cmdutil.UnwrapPath(err))}
	}
	obj := Object{Name: KeyObjectPrefix + sum, SHA256: sum, Bytes: size}
	rctx, cancel := f.request(ctx)
	info, err := f.blobs.GetInfo(rctx, obj.Name)
	cancel()
	if err == nil && int64(info.Size) == size {
		return obj, nil
	}
	if err != nil && !errors.Is(err, jetstream.ErrObjectNotFound) {
		return Object{}, fmt.Errorf("object store %s on %s: %w", BlobBucket, f.URL, err)
	}
	stored, err := f.putFile(ctx, obj.Name, path)
	if err != nil {
		return Object{}, err
	}
	if stored.SHA256 != sum {
		return Object{}, fmt.Errorf("--key %s changed while it was stored", path)
	}
	return stored, nil
}

// putFile stores the file at path as object name, hashing what it sends.
func (f *Farm) putFile(ctx context.Context, name, path string) (Object, error) {
	file, err := os.Open(path)
	if err != nil {
		return Object{}, &cmdutil.BadInputError{Err: fmt.Errorf("%s: %w", path, cmdutil.UnwrapPath(err))}
	}
	defer file.Close()
	h := sha256.New()
	// A large payload takes as long as it takes: no request timeout, only ctx.
	info, err := f.blobs.Put(ctx, jetstream.ObjectMeta{Name: name}, io.TeeReader(file, h))
	if err != nil {
		return Object{}, fmt.Errorf("storing %s as %s in %s on %s: %w", path, name, BlobBucket, f.URL, err)
	}
	return Object{Name: name, SHA256: hex.EncodeToString(h.Sum(nil)), Bytes: int64(info.Size)}, nil
}

// fileDigest is the SHA-256 (hex) and size of the file at path.
func fileDigest(path string) (string, int64, error) {
	file, err := os.Open(path)
	if err != nil {
		return "", 0, err
	}
	defer file.Close()
	h := sha256.New()
	n, err := io.Copy(h, file)
	if err != nil {
		return "", 0, err
	}
	return hex.EncodeToString(h.Sum(nil)), n, nil
}

// enqueue writes the job's status (queued) and publishes its record, deduplicated by its id.
func (f *Farm) enqueue(ctx context.Context, job *Job) error {
	b, err := job.Encode()
	if err != nil {
		return err
	}
	if _, err := f.updateStatus(ctx, job.ID, func(s *Status) bool {
		*s = Status{State: StateQueued, TraceName: job.TraceName, KeySHA256: job.Key.SHA256, SubmittedAt: job.SubmittedAt}
		return true
	}); err != nil {
		return err
	}
	rctx, cancel := f.request(ctx)
	defer cancel()
	if _, err := f.js.Publish(rctx, JobSubject, b, jetstream.WithMsgID(job.ID)); err != nil {
		f.deleteStatus(ctx, job.ID)
		return fmt.Errorf("job %s: publishing on %s (stream %s) of %s: %w", job.ID, JobSubject, JobStream, f.URL, err)
	}
	return nil
}

// deleteObject removes an object, if it is there (best effort: a leftover costs only space).
func (f *Farm) deleteObject(ctx context.Context, name string) {
	rctx, cancel := f.request(ctx)
	defer cancel()
	_ = f.blobs.Delete(rctx, name)
}

// deleteStatus removes a job's status (a job that was never queued).
func (f *Farm) deleteStatus(ctx context.Context, id string) {
	rctx, cancel := f.request(ctx)
	defer cancel()
	_ = f.status.Delete(rctx, id)
}

// NotDoneError is the error of ReadProof for a job that has no proof: its status says why.
type NotDoneError struct{ Status *Status }

func (e *NotDoneError) Error() string {
	s := e.Status
	switch s.State {
	case StateFailed:
		return fmt.Sprintf("job %s (%s) failed: %s", s.ID, s.TraceName, s.Error)
	case StateProving:
		return fmt.Sprintf("job %s (%s) has no proof yet: proving (attempt %d, worker %s)", s.ID, s.TraceName, s.Attempts, s.Worker)
	}
	return fmt.Sprintf("job %s (%s) has no proof yet: %s", s.ID, s.TraceName, s.State)
}

// ReadProof reads the proof of job id and its status: a NotDoneError when the job is not done,
// an error when the stored proof is not the one its status records.
func (f *Farm) ReadProof(ctx context.Context, id string) ([]byte, *Status, error) {
	st, err := f.Status(ctx, id)
	if err != nil {
		return nil, nil, err
	}
	if st.State != StateDone || st.Proof == nil {
		return nil, st, &NotDoneError{Status: st}
	}
	b, err := f.blobs.GetBytes(ctx, st.Proof.Name)
	if err != nil {
		return nil, st, fmt.Errorf("job %s: reading its proof %s from %s: %w", id, st.Proof.Name, f.URL, err)
	}
	sum := sha256.Sum256(b)
	if got := hex.EncodeToString(sum[:]); got != st.Proof.SHA256 {
		return nil, st, fmt.Errorf("job %s: the stored proof %s has SHA-256 %s, its status records %s", id, st.Proof.Name, got, st.Proof.SHA256)
	}
	return b, st, nil
}

// ProofObjects lists the names of the stored proofs (ProofObjectPrefix + job id).
func (f *Farm) ProofObjects(ctx context.Context) ([]string, error) {
	return f.objectNames(ctx, ProofObjectPrefix)
}

// objectNames lists the names of the objects of BlobBucket that begin with prefix.
func (f *Farm) objectNames(ctx context.Context, prefix string) ([]string, error) {
	rctx, cancel := f.request(ctx)
	defer cancel()
	infos, err := f.blobs.List(rctx)
	if errors.Is(err, jetstream.ErrNoObjectsFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("listing %s on %s: %w", BlobBucket, f.URL, err)
	}
	var out []string
	for _, in := range infos {
		if len(in.Name) >= len(prefix) && in.Name[:len(prefix)] == prefix {
			out = append(out, in.Name)
		}
	}
	return out, nil
}
