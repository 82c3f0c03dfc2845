package farm

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/metalprove/metalprove/internal/cmdutil"
	sp "github.com/metalprove/metalprove/internal/params"
	"github.com/metalprove/metalprove/internal/prover"
)

// WorkerConfig are the settings of a worker: what `metalprove worker` takes from its flags.
type WorkerConfig struct {
	// Name names the worker in the statuses of the jobs it takes up (default: host-pid).
	Name string
	// Concurrency is the number of jobs proved at once, each on its own device queue.
	Concurrency int
	// GPUs are the CUDA ordinals the jobs go round-robin over (nil: the device's first).
	GPUs []int
	// Settings are the global settings (device, device memory; nil: none).
	Settings *cmdutil.Settings
	// Logger receives a record per job (nil: none); the prover's own records go to it at
	// debug level.
	Logger *zerolog.Logger
	// WorkDir holds the keys (by digest), the traces and the proofs of the jobs in flight (""):
	// a new temporary directory, removed when Run returns).
	WorkDir string
}

// WorkerReport is what a worker did: what `metalprove worker --json` prints when it stops.
type WorkerReport struct {
	Worker string `json:"worker"`
	// Proved jobs have their proof stored and were acknowledged; Failed jobs were terminated
	// with their reason; Released jobs were given back for another attempt (a transient error,
	// or the worker draining); AlreadyDone jobs were delivered again after their proof was
	// stored and were acknowledged without proving.
	Proved      int `json:"proved"`
	Failed      int `json:"failed"`
	Released    int `json:"released"`
	AlreadyDone int `json:"already_done"`
}

// Worker pulls jobs from the farm and proves them (Run).
type Worker struct {
	farm    *Farm
	cfg     WorkerConfig
	log     zerolog.Logger
	workDir string

	keysMu sync.Mutex
	keys   map[string]*cachedKey

	// residents[slot] is the slot's device, opened by its first job and kept until Run returns
	// (prover.Resident: a job pays neither the device's opening nor, for a key proved before on
	// the slot, keygen).
	residentsMu sync.Mutex
	residents   []*prover.Resident

	mu     sync.Mutex
	report WorkerReport
	cancel context.CancelFunc

	// killed: the worker was killed (tests: a process killed by SIGKILL): nothing more is
	// acknowledged, given back or written.
	killed atomic.Bool
	hooks  workerHooks
}

// workerHooks let tests act at given points of a job: proving is called when the proof starts,
// stored when the proof and the status are stored, before the acknowledgement.
type workerHooks struct {
	proving func(ctx context.Context, jobID string)
	stored  func(ctx context.Context, jobID string)
}

// cachedKey is a proving key read once per worker: the file under the work directory, named by
// its digest, and the key read from it.
type cachedKey struct {
	mu   sync.Mutex
	path string
	key  *prover.Key
}

// NewWorker returns a worker of the farm f.
func NewWorker(f *Farm, cfg WorkerConfig) *Worker {
	if cfg.Concurrency < 1 {
		cfg.Concurrency = 1
	}
	if cfg.Name == "" {
		cfg.Name = DefaultWorkerName()
	}
	log := zerolog.Nop()
	if cfg.Logger != nil {
		log = *cfg.Logger
	}
	return &Worker{farm: f, cfg: cfg, log: log.With().Str("worker", cfg.Name).Logger(), keys: map[string]*cachedKey{}}
}

// DefaultWorkerName is host-pid.
func DefaultWorkerName() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "worker"
	}
	return fmt.Sprintf("%s-%d", host, os.Getpid())
}

// Report is what the worker did so far.
func (w *Worker) Report() WorkerReport {
	w.mu.Lock()
	defer w.mu.Unlock()
	r := w.report
	r.Worker = w.cfg.Name
	return r
}

func (w *Worker) count(f func(r *WorkerReport)) {
	w.mu.Lock()
	f(&w.report)
	w.mu.Unlock()
}

// Run pulls jobs and proves them, Concurrency at a time, until ctx is done; then it drains: the
// jobs in flight are given back at once (nak: redelivered to another worker without waiting for
// the ack wait), their proofs stopped, and Run returns when they have stopped. Connection
// trouble (a server restarting) is waited out. The error is one that stops the worker before
// any job: the consumer cannot be created, the work directory cannot be made.
func (w *Worker) Run(ctx context.Context) (WorkerReport, error) {
	if w.cfg.WorkDir == "" {
		dir, err := os.MkdirTemp("", "metalprove-worker-*")
		if err != nil {
			return w.Report(), fmt.Errorf("worker: work directory: %w", err)
		}
		defer os.RemoveAll(dir)
		w.workDir = dir
	} else {
		if err := os.MkdirAll(w.cfg.WorkDir, 0o755); err != nil {
			return w.Report(), fmt.Errorf("worker: work directory: %w", err)
		}
		w.workDir = w.cfg.WorkDir
	}
	cons, err := w.farm.workerConsumer(ctx)
	if err != nil {
		return w.Report(), err
	}
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	w.mu.Lock()
	w.cancel = cancel
	w.mu.Unlock()
	w.log.Info().Str("nats", w.farm.URL).Int("concurrency", w.cfg.Concurrency).Msg("worker started")

	slots := make(chan int, w.cfg.Concurrency)
	for i := range w.cfg.Concurrency {
		slots <- i
	}
	var wg sync.WaitGroup
	pause := func() {
		select {
		case <-runCtx.Done():
		case <-time.After(w.farm.opts.ReconnectWait):
		}
	}
	for runCtx.Err() == nil {
		var free []int
		select {
		case s := <-slots:
			free = append(free, s)
		case <-runCtx.Done():
			continue
		}
	more:
		for {
			select {
			case s := <-slots:
				free = append(free, s)
			default:
				break more
			}
		}
		batch, err := cons.Fetch(len(free), jetstream.FetchMaxWait(w.farm.opts.FetchWait))
		if err == nil {
			taken := 0
			for msg := range batch.Messages() {
				slot := free[taken]
				taken++
				wg.Add(1)
				go func() {
					defer wg.Done()
					defer func() { slots <- slot }()
					w.handle(runCtx, slot, msg)
				}()
			}
			free = free[taken:]
			err = batch.Error()
		}
		for _, s := range free {
			slots <- s
		}
		if err != nil && !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, jetstream.ErrNoMessages) && runCtx.Err() == nil && !w.killed.Load() {
			w.log.Warn().Err(err).Msg("pulling jobs")
			if errors.Is(err, jetstream.ErrConsumerNotFound) || errors.Is(err, jetstream.ErrConsumerDeleted) {
				if c, cerr := w.farm.workerConsumer(runCtx); cerr == nil {
					cons = c
				}
			}
			pause()
		}
	}
	wg.Wait()
	w.residentsMu.Lock()
	for i, res := range w.residents {
		if res != nil {
			res.Close()
			w.residents[i] = nil
		}
	}
	w.residentsMu.Unlock()
	r := w.Report()
	w.log.Info().Int("proved", r.Proved).Int("failed", r.Failed).Int("released", r.Released).Msg("worker stopped")
	return r, nil
}

// kill stops the worker as SIGKILL stops a process: no job is acknowledged or given back any
// more, nothing more is written, the connection is closed. Its jobs are redelivered after the
// ack wait. For tests.
func (w *Worker) kill() {
	w.killed.Store(true)
	w.mu.Lock()
	if w.cancel != nil {
		w.cancel()
	}
	w.mu.Unlock()
	w.farm.nc.Close()
}

// settlement answers a delivery once: the first of acknowledge, give back or terminate that
// goes through wins; a killed worker answers nothing.
type settlement struct {
	w    *Worker
	msg  jetstream.Msg
	mu   sync.Mutex
	done bool
}

// do runs answer unless the delivery is answered or the worker killed; it reports whether
// answer ran and succeeded.
func (s *settlement) do(answer func() error) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.done || s.w.killed.Load() {
		return false, nil
	}
	if err := answer(); err != nil {
		return false, err
	}
	s.done = true
	return true, nil
}

func (s *settlement) settled() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.done
}

// handle takes up one delivery.
func (w *Worker) handle(runCtx context.Context, slot int, msg jetstream.Msg) {
	set := &settlement{w: w, msg: msg}
	delivered := uint64(1)
	if meta, err := msg.Metadata(); err == nil {
		delivered = meta.NumDelivered
	}
	job, err := DecodeJob(msg.Data())
	if err != nil {
		id := msg.Headers().Get(jetstream.MsgIDHeader)
		w.fail(runCtx, set, id, nil, &cmdutil.BadInputError{Err: err})
		return
	}
	log := w.log.With().Str("job", job.ID).Str("trace", job.TraceName).Uint64("delivery", delivered).Logger()
	if runCtx.Err() != nil { // fetched as the worker began to drain
		w.release(set, job, "the worker is stopping", 0, log)
		return
	}
	if max := uint64(w.farm.opts.MaxAttempts); delivered > max {
		w.fail(runCtx, set, job.ID, job, &cmdutil.CheckFailedError{Err: fmt.Errorf(
			"delivered %d times without a result (the workers that took it up stopped, crashed or timed out): given up after %d attempts", delivered, max)})
		return
	}

	// From here on the job is in progress: a heartbeat keeps it from being redelivered (for at
	// most MaxJobTime), and a worker that drains gives it back at once (while it proves), or when
	// the job stops (whatever answer was not given).
	defer func() {
		if runCtx.Err() != nil && !w.killed.Load() {
			w.release(set, job, "the worker is stopping", 0, log)
		}
	}()
	var watching sync.WaitGroup
	defer watching.Wait()
	jobDone := make(chan struct{})
	defer close(jobDone)
	jobCtx, cancelJob := context.WithTimeout(runCtx, w.farm.opts.MaxJobTime)
	defer cancelJob()
	go w.heartbeat(jobCtx, set)
	watching.Go(func() {
		select {
		case <-runCtx.Done():
			if !w.killed.Load() {
				w.release(set, job, "the worker is stopping", 0, log)
			}
		case <-jobDone:
		}
	})

	st, err := w.farm.updateStatus(runCtx, job.ID, func(s *Status) bool {
		if s.Ended() || w.killed.Load() {
			return false
		}
		if s.SubmittedAt.IsZero() { // no status (removed): what the job says
			s.TraceName, s.KeySHA256, s.SubmittedAt = job.TraceName, job.Key.SHA256, job.SubmittedAt
		}
		s.State, s.Worker, s.Error, s.ExitCode = StateProving, w.cfg.Name, "", 0
		s.Attempts++
		return true
	})
	switch {
	case w.killed.Load() || runCtx.Err() != nil:
		return
	case err != nil:
		w.retryLater(runCtx, set, job, delivered, err, log)
		return
	case st.State == StateFailed:
		// Failed already (by a worker whose termination did not reach the server).
		if ok, _ := set.do(func() error { return msg.TermWithReason("failed already: " + short(st.Error)) }); ok {
			w.farm.deleteObject(runCtx, job.Trace.Name)
		}
		return
	case st.State == StateDone:
		if w.proofStored(runCtx, st) {
			if w.acknowledge(runCtx, set, job, log) {
				w.count(func(r *WorkerReport) { r.AlreadyDone++ })
				log.Info().Msg("proof stored already: acknowledged")
			}
			return
		}
		// Done without its proof (removed by hand): prove again.
		if _, err := w.farm.updateStatus(runCtx, job.ID, func(s *Status) bool {
			s.State, s.Worker, s.Proof = StateProving, w.cfg.Name, nil
			s.Attempts++
			return true
		}); err != nil {
			w.retryLater(runCtx, set, job, delivered, err, log)
			return
		}
	}
	if h := w.hooks.proving; h != nil {
		h(jobCtx, job.ID)
	}
	start := time.Now()
	proof, err := w.prove(jobCtx, slot, job, log)
	elapsed := time.Since(start)
	switch {
	case w.killed.Load() || runCtx.Err() != nil:
		return // given back by the drain above, or killed
	case jobCtx.Err() != nil:
		w.retryLater(runCtx, set, job, delivered, fmt.Errorf("stopped after %s, the longest an attempt may take", w.farm.opts.MaxJobTime), log)
		return
	case err != nil && permanent(err):
		w.fail(runCtx, set, job.ID, job, err)
		return
	case err != nil:
		w.retryLater(runCtx, set, job, delivered, err, log)
		return
	}
	obj, err := w.storeProof(runCtx, job, proof)
	if err == nil {
		_, err = w.farm.updateStatus(runCtx, job.ID, func(s *Status) bool {
			if w.killed.Load() {
				return false
			}
			s.State, s.Proof, s.ProveMS, s.Worker, s.Error, s.ExitCode = StateDone, &obj, ms(elapsed), w.cfg.Name, "", 0
			return true
		})
	}
	if w.killed.Load() || runCtx.Err() != nil {
		return
	}
	if err != nil {
		w.retryLater(runCtx, set, job, delivered, err, log)
		return
	}
	if h := w.hooks.stored; h != nil {
		h(runCtx, job.ID)
	}
	if w.acknowledge(runCtx, set, job, log) {
		w.count(func(r *WorkerReport) { r.Proved++ })
		log.Info().Int("proof_bytes", len(proof)).Str("elapsed", elapsed.Round(time.Millisecond).String()).Msg("proved")
	}
}

// heartbeat tells the server every Heartbeat that the delivery is in progress, until ctx is
// done.
func (w *Worker) heartbeat(ctx context.Context, set *settlement) {
	t := time.NewTicker(w.farm.opts.Heartbeat)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if w.killed.Load() || set.settled() {
				return
			}
			_ = set.msg.InProgress() // a lost one is followed by the next; at worst a redelivery
		}
	}
}

// acknowledge acknowledges a job whose proof is stored, retrying while the server is away, then
// removes its trace. It reports whether this worker acknowledged it.
func (w *Worker) acknowledge(ctx context.Context, set *settlement, job *Job, log zerolog.Logger) bool {
	acked := false
	err := w.farm.retry(ctx, func(rctx context.Context) error {
		ok, err := set.do(func() error { return set.msg.DoubleAck(rctx) })
		acked = acked || ok
		if err == nil || errors.Is(err, jetstream.ErrMsgAlreadyAckd) {
			return nil
		}
		return err
	})
	if err != nil {
		// The proof and the status are stored: the redelivery finds them and acknowledges.
		log.Warn().Err(err).Msg("acknowledging the job failed; its redelivery will find the proof")
		return false
	}
	if acked {
		w.farm.deleteObject(ctx, job.Trace.Name)
	}
	return acked
}

// release gives a job back for another delivery after delay, its status queued again with why.
func (w *Worker) release(set *settlement, job *Job, why string, delay time.Duration, log zerolog.Logger) {
	ok, err := set.do(func() error {
		if delay > 0 {
			return set.msg.NakWithDelay(delay)
		}
		return set.msg.Nak()
	})
	if !ok {
		if err != nil {
			log.Warn().Err(err).Msg("giving the job back failed: it is redelivered after the ack wait")
		}
		return
	}
	_ = w.farm.nc.Flush()
	w.count(func(r *WorkerReport) { r.Released++ })
	log.Info().Str("why", why).Msg("job given back")
	ctx, cancel := context.WithTimeout(context.Background(), w.farm.opts.RequestTimeout)
	defer cancel()
	_, _ = w.farm.updateStatus(ctx, job.ID, func(s *Status) bool {
		if s.State != StateProving || s.Worker != w.cfg.Name || w.killed.Load() {
			return false
		}
		s.State = StateQueued
		if s.Error == "" {
			s.Error = "given back by " + w.cfg.Name + ": " + why
		}
		return true
	})
}

// retryLater gives a job back after a transient error (the server away, a device failing), to
// be tried again after a pause; at its last attempt the job fails with the error.
func (w *Worker) retryLater(ctx context.Context, set *settlement, job *Job, delivered uint64, cause error, log zerolog.Logger) {
	if w.killed.Load() || ctx.Err() != nil {
		return
	}
	if delivered >= uint64(w.farm.opts.MaxAttempts) {
		w.fail(ctx, set, job.ID, job, fmt.Errorf("attempt %d of %d: %w", delivered, w.farm.opts.MaxAttempts, cause))
		return
	}
	msg := fmt.Sprintf("attempt %d: %v", delivered, cause)
	log.Warn().Err(cause).Msg("job failed; it will be tried again")
	sctx, cancel := context.WithTimeout(context.Background(), w.farm.opts.RequestTimeout)
	_, _ = w.farm.updateStatus(sctx, job.ID, func(s *Status) bool {
		if s.Ended() || w.killed.Load() {
			return false
		}
		s.State, s.Error, s.ExitCode = StateQueued, msg, int(cmdutil.ExitCodeFor(cause))
		return true
	})
	cancel()
	w.release(set, job, msg, min(time.Duration(delivered)*w.farm.opts.AckWait/10, w.farm.opts.AckWait), log)
}

// fail terminates a job that cannot succeed and records why in its status (when its id is
// known: a record that does not decode may not say it).
func (w *Worker) fail(ctx context.Context, set *settlement, id string, job *Job, cause error) {
	if w.killed.Load() {
		return
	}
	log := w.log.With().Str("job", id).Logger()
	reason := cause.Error()
	code := int(cmdutil.ExitCodeFor(cause))
	if CheckJobID(id) == nil {
		if err := w.farm.retry(ctx, func(rctx context.Context) error {
			_, err := w.farm.updateStatus(rctx, id, func(s *Status) bool {
				if s.State == StateDone || w.killed.Load() {
					return false
				}
				if job != nil && s.SubmittedAt.IsZero() {
					s.TraceName, s.KeySHA256, s.SubmittedAt = job.TraceName, job.Key.SHA256, job.SubmittedAt
				}
				s.State, s.Error, s.ExitCode, s.Worker = StateFailed, reason, code, w.cfg.Name
				return true
			})
			return err
		}); err != nil {
			log.Warn().Err(err).Msg("recording the failure of the job")
		}
	}
	ok, err := set.do(func() error { return set.msg.TermWithReason(short(reason)) })
	if err != nil {
		log.Warn().Err(err).Msg("terminating the job failed: it is redelivered and fails again")
	}
	_ = w.farm.nc.Flush()
	if !ok {
		return
	}
	if job != nil {
		w.farm.deleteObject(ctx, job.Trace.Name)
	}
	w.count(func(r *WorkerReport) { r.Failed++ })
	log.Warn().Int("exit_code", code).Str("error", reason).Msg("job failed")
}

// short cuts a reason to what a termination advisory carries.
func short(s string) string {
	if len(s) > 256 {
		return s[:253] + "..."
	}
	return s
}

// permanent reports whether a job failing with err would fail again anywhere: its inputs are
// wrong (a bad trace, key or record, a payload over the limits, constraints that fail).
func permanent(err error) bool {
	switch cmdutil.ExitCodeFor(err) {
	case cmdutil.ExitUsage, cmdutil.ExitBadInput, cmdutil.ExitCheckFailed:
		return true
	}
	return errors.Is(err, errPermanent)
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// proofStored reports whether the proof a done status records is in the object store.
func (w *Worker) proofStored(ctx context.Context, st *Status) bool {
	if st.Proof == nil {
		return false
	}
	rctx, cancel := w.farm.request(ctx)
	defer cancel()
	info, err := w.farm.blobs.GetInfo(rctx, st.Proof.Name)
	return err == nil && int64(info.Size) == st.Proof.Bytes
}

// storeProof stores a job's proof under its id (replacing one stored by an earlier delivery:
// the same bytes), retrying while the server is away.
func (w *Worker) storeProof(ctx context.Context, job *Job, proof []byte) (Object, error) {
	sum := sha256.Sum256(proof)
	obj := Object{Name: ProofObjectPrefix + job.ID, SHA256: hex.EncodeToString(sum[:]), Bytes: int64(len(proof))}
	err := w.farm.retry(ctx, func(rctx context.Context) error {
		if w.killed.Load() {
			return fmt.Errorf("%w: killed", errPermanent)
		}
		_, err := w.farm.blobs.PutBytes(rctx, obj.Name, proof)
		return err
	})
	if err != nil {
		return Object{}, fmt.Errorf("storing the proof as %s on %s: %w", obj.Name, w.farm.URL, err)
	}
	return obj, nil
}

// prove fetches the job's key and trace and proves (prover.Prove) on the slot's resident device.
// Errors name the trace by the name it was submitted with, not by its path here.
func (w *Worker) prove(ctx context.Context, slot int, job *Job, log zerolog.Logger) ([]byte, error) {
	key, err := w.key(ctx, job)
	if err != nil {
		return nil, err
	}
	jobDir := filepath.Join(w.workDir, "jobs", job.ID)
	inDir := filepath.Join(jobDir, "in")
	if err := os.MkdirAll(inDir, 0o755); err != nil {
		return nil, fmt.Errorf("worker: %w", err)
	}
	defer os.RemoveAll(jobDir)
	trace := filepath.Join(inDir, job.TraceName)
	if err := w.fetch(ctx, job.Trace, "trace "+job.TraceName, w.farm.opts.MaxTraceBytes, trace); err != nil {
		return nil, err
	}
	out := filepath.Join(jobDir, job.ID+".proof")
	plog := log
	if log.GetLevel() >= zerolog.InfoLevel { // the prover's records per stage: at --log-level debug only
		plog = log.Level(max(log.GetLevel(), zerolog.WarnLevel))
	}
	res, err := w.resident(slot, plog)
	if err != nil {
		return nil, err
	}
	_, err = prover.Prove(ctx, prover.ProveRequest{
		Trace: trace, Output: out, Key: key.path, KeyRead: key.key, Airs: job.Airs,
		AllowInsecure: job.AllowInsecure, Settings: w.cfg.Settings, Logger: &plog, Resident: res,
	})
	if err != nil {
		return nil, w.scrub(err, inDir)
	}
	return os.ReadFile(out)
}

// resident returns the slot's device, opening it on the slot's GPU (round-robin over GPUs) the
// first time.
func (w *Worker) resident(slot int, log zerolog.Logger) (*prover.Resident, error) {
	w.residentsMu.Lock()
	defer w.residentsMu.Unlock()
	if w.residents == nil {
		w.residents = make([]*prover.Resident, w.cfg.Concurrency)
	}
	if r := w.residents[slot]; r != nil {
		return r, nil
	}
	ordinal := 0
	if len(w.cfg.GPUs) > 0 {
		ordinal = w.cfg.GPUs[slot%len(w.cfg.GPUs)]
	}
	r, err := prover.OpenResident(w.cfg.Settings, ordinal, &log)
	if err != nil {
		return nil, err
	}
	w.residents[slot] = r
	return r, nil
}

// jobError is an error whose message names the job's files as submitted; it unwraps to the
// error it rewrites (its exit status).
type jobError struct {
	err error
	msg string
}

func (e *jobError) Error() string { return e.msg }
func (e *jobError) Unwrap() error { return e.err }

// scrub rewrites err's message so that it names the trace by its submitted name and the key by
// its object name, not by their paths in the work directory.
func (w *Worker) scrub(err error, inDir string) error {
	msg := strings.ReplaceAll(err.Error(), inDir+string(filepath.Separator), "")
	msg = strings.ReplaceAll(msg, w.workDir+string(filepath.Separator), "")
	return &jobError{err: err, msg: msg}
}

// key returns the job's proving key: read once per worker, fetched into the work directory by
// its digest. A key the store does not hold, one over the limit or one that does not read is a
// BadInputError; insecure parameters without the job's AllowInsecure a UsageError.
func (w *Worker) key(ctx context.Context, job *Job) (*cachedKey, error) {
	w.keysMu.Lock()
	ck := w.keys[job.Key.SHA256]
	if ck == nil {
		ck = &cachedKey{}
		w.keys[job.Key.SHA256] = ck
	}
	w.keysMu.Unlock()
	ck.mu.Lock()
	defer ck.mu.Unlock()
	if ck.key == nil {
		path := filepath.Join(w.workDir, job.Key.Name+".pk")
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return nil, fmt.Errorf("worker: %w", err)
		}
		if err := w.fetch(ctx, job.Key, "proving key "+job.Key.SHA256, w.farm.opts.MaxKeyBytes, path); err != nil {
			return nil, err
		}
		k, err := prover.ReadKey(path, true)
		if err != nil {
			return nil, w.scrub(err, "")
		}
		ck.path, ck.key = path, k
	}
	if ck.key.SecurityBits < sp.SecurityBitsTarget && !job.AllowInsecure {
		return nil, cmdutil.Usagef("proving key %s: its parameters have a %d-bit security target (INSECURE); submit with --allow-insecure to use them", job.Key.SHA256, ck.key.SecurityBits)
	}
	return ck, nil
}

// fetch copies object obj (what names it in errors) into the file path, refusing one over limit
// bytes and one whose SHA-256 is not the recorded one. A missing object, one over the limit and
// one that is not what the job recorded are BadInputErrors: the job cannot succeed.
func (w *Worker) fetch(ctx context.Context, obj Object, what string, limit int64, path string) error {
	bad := func(format string, args ...any) error {
		return &cmdutil.BadInputError{Err: fmt.Errorf(what+": "+format, args...)}
	}
	var info *jetstream.ObjectInfo
	err := w.farm.retry(ctx, func(rctx context.Context) error {
		var err error
		info, err = w.farm.blobs.GetInfo(rctx, obj.Name)
		if errors.Is(err, jetstream.ErrObjectNotFound) {
			return fmt.Errorf("%w: %w", errPermanent, err)
		}
		return err
	})
	switch {
	case errors.Is(err, jetstream.ErrObjectNotFound):
		return bad("not in the object store %s (as %s)", BlobBucket, obj.Name)
	case err != nil:
		return fmt.Errorf("%s: %w", what, err)
	case int64(info.Size) > limit:
		return bad("%d bytes, over the farm's limit of %d bytes", info.Size, limit)
	}
	file, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("worker: %w", err)
	}
	defer file.Close()
	res, err := w.farm.blobs.Get(ctx, obj.Name)
	if err != nil {
		return fmt.Errorf("%s: reading %s: %w", what, obj.Name, err)
	}
	defer res.Close()
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(file, h), io.LimitReader(res, limit+1))
	if err != nil {
		return fmt.Errorf("%s: reading %s: %w", what, obj.Name, err)
	}
	if n > limit {
		return bad("over the farm's limit of %d bytes", limit)
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != obj.SHA256 {
		return bad("the stored object %s has SHA-256 %s, the job records %s", obj.Name, got, obj.SHA256)
	}
	return file.Close()
}
