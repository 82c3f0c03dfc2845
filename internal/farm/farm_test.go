package farm

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/metalprove/metalprove/internal/air/testair"
	"github.com/metalprove/metalprove/internal/cmdutil"
	"github.com/metalprove/metalprove/internal/examples"
)

// Three workers, 30 jobs: one worker killed while it proves a job, another killed after it
// stored a proof but before it acknowledged the job, the first one restarted. Every job ends
// with exactly one stored proof, byte-identical to the direct proof, which verifies; no job is
// lost and none is left pending.
func TestFarmWorkersKilledAndRestarted(t *testing.T) {
	srv := startServer(t)
	opts := testOptions()
	fx := fibFixture(t, 30)
	client := connect(t, srv.URL(), opts)

	provingHeld, storedHeld := make(chan string, 1), make(chan string, 1)
	w1 := startWorker(t, srv.URL(), "w1", opts, workerHooks{proving: holdFirst(provingHeld)})
	w2 := startWorker(t, srv.URL(), "w2", opts, workerHooks{})
	w3 := startWorker(t, srv.URL(), "w3", opts, workerHooks{stored: holdFirst(storedHeld)})
	// Every worker waits for a job before any is submitted, so that each takes one up.
	waitPulling(t, client, 3)

	subs, err := client.Submit(context.Background(), SubmitRequest{Key: fx.key, Traces: fx.traces, AllowInsecure: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(subs) != len(fx.traces) {
		t.Fatalf("%d jobs submitted for %d traces", len(subs), len(fx.traces))
	}
	ids := make([]string, len(subs))
	for i, s := range subs {
		ids[i] = s.ID
	}
	killedMidProof := receive(t, provingHeld, "w1 taking up a job")
	r1 := w1.killWorker(t)
	killedBeforeAck := receive(t, storedHeld, "w3 storing a proof")
	r3 := w3.killWorker(t)
	w1again := startWorker(t, srv.URL(), "w1", opts, workerHooks{})

	statuses := waitEnded(t, client, ids, 60*time.Second)
	checkAllProved(t, client, fx, subs, statuses)
	all, err := client.Statuses(context.Background())
	if err != nil || len(all) != len(ids) {
		t.Errorf("Statuses: %d jobs, %v; want %d", len(all), err, len(ids))
	}
	for i := 1; i < len(all); i++ {
		if all[i].SubmittedAt.Before(all[i-1].SubmittedAt) {
			t.Errorf("Statuses not oldest first: %s after %s", all[i].SubmittedAt, all[i-1].SubmittedAt)
		}
	}

	if st := statuses[killedMidProof]; st.Attempts < 2 {
		t.Errorf("job %s, killed mid-proof: %d attempts, want it taken up again", killedMidProof, st.Attempts)
	}
	if st := statuses[killedBeforeAck]; st.Worker != "w3" || st.Attempts != 1 {
		t.Errorf("job %s, proof stored by w3 before it was killed: worker %s, %d attempts; want w3's proof kept, not proved again", killedBeforeAck, st.Worker, st.Attempts)
	}
	if r1.Proved != 0 || r3.Proved != 0 {
		t.Errorf("killed workers acknowledged jobs: w1 %+v, w3 %+v", r1, r3)
	}
	r2, r1again := w2.stop(t), w1again.stop(t)
	if got := r2.Proved + r1again.Proved; got != len(subs)-1 {
		t.Errorf("the surviving workers proved %d jobs (w2 %+v, w1 again %+v), want %d (all but the one whose proof w3 stored)", got, r2, r1again, len(subs)-1)
	}
	if got := r2.AlreadyDone + r1again.AlreadyDone; got != 1 {
		t.Errorf("%d redeliveries found their proof stored, want 1 (w3's)", got)
	}
}

// waitPulling waits until n workers wait for a job.
func waitPulling(t *testing.T, f *Farm, n int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		q, err := f.Queue(context.Background())
		if err == nil && q.Pulling >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("fewer than %d workers pulling within 30 s: %+v, %v", n, q, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// The server restarted (same JetStream file storage) while a worker holds a job in flight and
// other jobs wait: no job and no proof is lost.
func TestFarmServerRestarted(t *testing.T) {
	srv := startServer(t)
	opts := testOptions()
	fx := fibFixture(t, 12)
	client := connect(t, srv.URL(), opts)

	held := make(chan string, 1)
	resume := make(chan struct{})
	var once bool
	startWorker(t, srv.URL(), "holder", opts, workerHooks{proving: func(ctx context.Context, id string) {
		if !once {
			once = true
			held <- id
			select {
			case <-resume:
			case <-ctx.Done():
			}
		}
	}})
	waitPulling(t, client, 1)
	startWorker(t, srv.URL(), "slow", opts, workerHooks{proving: func(ctx context.Context, _ string) {
		select { // 100 ms a job: jobs still wait when the server goes
		case <-time.After(100 * time.Millisecond):
		case <-ctx.Done():
		}
	}})
	subs, err := client.Submit(context.Background(), SubmitRequest{Key: fx.key, Traces: fx.traces, AllowInsecure: true})
	if err != nil {
		t.Fatal(err)
	}
	ids := make([]string, len(subs))
	for i, s := range subs {
		ids[i] = s.ID
	}
	inFlight := receive(t, held, "a job held in flight")
	time.Sleep(250 * time.Millisecond) // a job or two done

	srv2, err := srv.Restart()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv2.Stop)
	close(resume)

	statuses := waitEnded(t, client, ids, 60*time.Second)
	after := connect(t, srv2.URL(), opts) // a new client sees the same
	checkAllProved(t, after, fx, subs, statuses)
	if st := statuses[inFlight]; st.State != StateDone {
		t.Errorf("the job in flight across the restart: %+v", st)
	}
}

// Bad inputs through the queue: each job fails with its reason, terminated (not retried), and
// the worker keeps serving: the good job after them is proved.
func TestFarmBadInputs(t *testing.T) {
	srv := startServer(t)
	opts := testOptions()
	opts.MaxTraceBytes = 4096
	client := connect(t, srv.URL(), opts)
	ctx := context.Background()
	fibKey, pairKey, good, big, dir := badInputFiles(t)
	garbage := filepath.Join(dir, "garbage.trace")
	if err := os.WriteFile(garbage, []byte("MPTRACE\x00 this is not a trace file"), 0o644); err != nil {
		t.Fatal(err)
	}
	wrongCells := filepath.Join(dir, "wrong.trace")
	in := testair.Fibonacci(0, 1, 16)
	cells := in.MainCells()
	cells[7] = cells[7].Add(fieldOf(1))
	writeTrace(t, wrongCells, []examples.Section{{Name: in.Air.Name(), Air: in.Air, Height: in.Height(), Cells: cells, Public: in.Trace.Public}})

	cases := []struct {
		name     string
		id       string
		want     string // in the status's error
		exitCode cmdutil.ExitCode
	}{
		{"malformed trace", enqueueFiles(t, client, fibKey, garbage), "garbage.trace", cmdutil.ExitBadInput},
		{"wrong key", enqueueFiles(t, client, pairKey, good), "good.trace: 1 sections for the 2 AIRs proved", cmdutil.ExitBadInput},
		{"unknown key", enqueueUnknownKey(t, client, good), "not in the object store", cmdutil.ExitBadInput},
		{"oversized trace", enqueueFiles(t, client, fibKey, big), "over the farm's limit of 4096 bytes", cmdutil.ExitBadInput},
		{"constraints fail", enqueueFiles(t, client, fibKey, wrongCells), "wrong.trace", cmdutil.ExitCheckFailed},
		{"record not JSON", publishRecord(t, client, "notjson0001", []byte("{not json")), "not JSON of a job", cmdutil.ExitBadInput},
		{"record of a newer version", publishRecord(t, client, "version0002", []byte(`{"version":2,"id":"version0002"}`)), "job record version 2: this metalprove reads version 1", cmdutil.ExitBadInput},
	}
	goodID := enqueueFiles(t, client, fibKey, good)

	w := startWorker(t, srv.URL(), "w", opts, workerHooks{})
	ids := []string{goodID}
	for _, c := range cases {
		ids = append(ids, c.id)
	}
	statuses := waitEnded(t, client, ids, 60*time.Second)
	for _, c := range cases {
		st := statuses[c.id]
		if st.State != StateFailed || !strings.Contains(st.Error, c.want) || st.ExitCode != int(c.exitCode) {
			t.Errorf("%s: %s (exit %d) %q; want failed, exit %d, naming %q", c.name, st.State, st.ExitCode, st.Error, c.exitCode, c.want)
		}
		if st.Attempts > 1 {
			t.Errorf("%s: %d attempts: a job that cannot succeed is terminated, not retried", c.name, st.Attempts)
		}
		if _, _, err := client.ReadProof(ctx, c.id); err == nil || !strings.Contains(err.Error(), "failed: ") {
			t.Errorf("%s: ReadProof: %v, want the job's failure", c.name, err)
		}
	}
	if st := statuses[goodID]; st.State != StateDone {
		t.Errorf("the good job after the bad ones: %+v", st)
	}
	proof, _, err := client.ReadProof(ctx, goodID)
	if err != nil {
		t.Fatal(err)
	}
	verifyProof(t, fibKey, proof, true)
	checkQueueEmpty(t, client)
	r := w.stop(t)
	if r.Failed != len(cases) || r.Proved != 1 || r.Released != 0 {
		t.Errorf("worker report %+v, want %d failed, 1 proved, none given back", r, len(cases))
	}
}

// badInputFiles makes in a new directory a fibonacci key and an interaction-pair key (test
// preset), a fibonacci trace of 16 rows that fits the first and one of 1024 rows (8 KiB, over a
// limit of 4096 bytes).
func badInputFiles(t *testing.T) (fibKey, pairKey, good, big, dir string) {
	t.Helper()
	dir = t.TempDir()
	fibKey = makeKey(t, dir, "fibonacci", 16)
	pairKey = makeKey(t, dir, "interaction-pair", 4)
	good = filepath.Join(dir, "good.trace")
	writeExampleTrace(t, good, "fibonacci", examples.Options{Rows: 16})
	big = filepath.Join(dir, "big.trace")
	writeExampleTrace(t, big, "fibonacci", examples.Options{Rows: 1024})
	return fibKey, pairKey, good, big, dir
}

// enqueueFiles stores a key and a trace and queues their job without Submit's checks (a record
// such as an older or faulty client might send).
func enqueueFiles(t *testing.T, f *Farm, key, trace string) string {
	t.Helper()
	ctx := context.Background()
	keyObj, err := f.putKey(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	id := NewJobID()
	traceObj, err := f.putFile(ctx, TraceObjectPrefix+id, trace)
	if err != nil {
		t.Fatal(err)
	}
	job := &Job{Version: JobVersion, ID: id, Key: keyObj, Trace: traceObj, TraceName: TraceFileName(trace), AllowInsecure: true, SubmittedAt: time.Now().UTC()}
	if err := f.enqueue(ctx, job); err != nil {
		t.Fatal(err)
	}
	return id
}

// enqueueUnknownKey queues a job naming a key the store does not hold.
func enqueueUnknownKey(t *testing.T, f *Farm, trace string) string {
	t.Helper()
	ctx := context.Background()
	id := NewJobID()
	traceObj, err := f.putFile(ctx, TraceObjectPrefix+id, trace)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256([]byte("a key nobody stored"))
	digest := hex.EncodeToString(sum[:])
	job := &Job{Version: JobVersion, ID: id, Key: Object{Name: KeyObjectPrefix + digest, SHA256: digest, Bytes: 1}, Trace: traceObj,
		TraceName: TraceFileName(trace), AllowInsecure: true, SubmittedAt: time.Now().UTC()}
	if err := f.enqueue(ctx, job); err != nil {
		t.Fatal(err)
	}
	return id
}

// publishRecord publishes raw bytes as a job record with job id id.
func publishRecord(t *testing.T, f *Farm, id string, record []byte) string {
	t.Helper()
	if _, err := f.js.Publish(context.Background(), JobSubject, record, jetstream.WithMsgID(id)); err != nil {
		t.Fatal(err)
	}
	return id
}

// A job on which every worker that takes it up dies (a poison job) is given up after
// MaxAttempts deliveries, with its reason, and the queue goes on: the next job is proved.
func TestFarmPoisonJobBounded(t *testing.T) {
	srv := startServer(t)
	opts := testOptions()
	opts.MaxAttempts = 2
	opts.AckWait = 700 * time.Millisecond
	fx := fibFixture(t, 2)
	client := connect(t, srv.URL(), opts)
	ctx := context.Background()

	subs, err := client.Submit(ctx, SubmitRequest{Key: fx.key, Traces: fx.traces[:1], AllowInsecure: true})
	if err != nil {
		t.Fatal(err)
	}
	poison := subs[0].ID
	for i := range opts.MaxAttempts {
		held := make(chan string, 1)
		w := startWorker(t, srv.URL(), "crasher"+itoa(i), opts, workerHooks{proving: holdFirst(held)})
		if id := receive(t, held, "a crashing worker taking up the job"); id != poison {
			t.Fatalf("crashing worker %d took up %s, want the poison job %s", i, id, poison)
		}
		w.killWorker(t)
	}
	w := startWorker(t, srv.URL(), "w", opts, workerHooks{})
	next, err := client.Submit(ctx, SubmitRequest{Key: fx.key, Traces: fx.traces[1:], AllowInsecure: true})
	if err != nil {
		t.Fatal(err)
	}
	statuses := waitEnded(t, client, []string{poison, next[0].ID}, 30*time.Second)
	st := statuses[poison]
	if st.State != StateFailed || !strings.Contains(st.Error, "delivered 3 times without a result") || st.Attempts != opts.MaxAttempts {
		t.Errorf("poison job: %+v; want failed after %d attempts", st, opts.MaxAttempts)
	}
	checkAllProved(t, client, fx, next, statuses)
	if r := w.stop(t); r.Failed != 1 || r.Proved != 1 {
		t.Errorf("worker report %+v, want 1 failed, 1 proved", r)
	}
}

// A proof longer than the ack wait is not redelivered: the worker's heartbeat (in-progress
// acknowledgements) keeps it. keccakf-2 takes about 3 s on 2 cores; the ack wait is 1 s.
func TestFarmHeartbeatKeepsSlowProof(t *testing.T) {
	srv := startServer(t)
	opts := testOptions()
	opts.AckWait = time.Second
	opts.Heartbeat = 250 * time.Millisecond
	dir := t.TempDir()
	key := makeKey(t, dir, "keccakf", 0)
	trace := filepath.Join(dir, "k2.trace")
	writeExampleTrace(t, trace, "keccakf", examples.Options{Perms: 2, Seed: 42})
	client := connect(t, srv.URL(), opts)
	w1 := startWorker(t, srv.URL(), "w1", opts, workerHooks{})
	w2 := startWorker(t, srv.URL(), "w2", opts, workerHooks{})

	start := time.Now()
	subs, err := client.Submit(context.Background(), SubmitRequest{Key: key, Traces: []string{trace}})
	if err != nil {
		t.Fatal(err)
	}
	st := waitEnded(t, client, []string{subs[0].ID}, 60*time.Second)[subs[0].ID]
	took := time.Since(start)
	if st.State != StateDone || st.Attempts != 1 {
		t.Errorf("slow job: %+v; want done at its first attempt", st)
	}
	if took < 2*opts.AckWait {
		t.Logf("the proof took %s, less than twice the ack wait: the heartbeat was hardly needed", took)
	}
	proof, _, err := client.ReadProof(context.Background(), subs[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	verifyProof(t, key, proof, false)
	checkQueueEmpty(t, client) // the acknowledgement follows the done status
	r1, r2 := w1.stop(t), w2.stop(t)
	if r1.Proved+r2.Proved != 1 || r1.AlreadyDone+r2.AlreadyDone != 0 || r1.Released+r2.Released != 0 {
		t.Errorf("reports %+v %+v: want one proof, no redelivery", r1, r2)
	}
}

// A proof that hangs is stopped after MaxJobTime and its job given back, then proved at its
// next attempt.
func TestFarmHungProofGivenBack(t *testing.T) {
	srv := startServer(t)
	opts := testOptions()
	opts.MaxJobTime = 500 * time.Millisecond
	fx := fibFixture(t, 1)
	client := connect(t, srv.URL(), opts)
	held := make(chan string, 1)
	w := startWorker(t, srv.URL(), "w", opts, workerHooks{proving: holdFirst(held)})
	subs, err := client.Submit(context.Background(), SubmitRequest{Key: fx.key, Traces: fx.traces, AllowInsecure: true})
	if err != nil {
		t.Fatal(err)
	}
	receive(t, held, "the worker taking up the job")
	statuses := waitEnded(t, client, []string{subs[0].ID}, 20*time.Second)
	checkAllProved(t, client, fx, subs, statuses)
	if st := statuses[subs[0].ID]; st.Attempts != 2 {
		t.Errorf("status %+v, want proved at the second attempt", st)
	}
	if r := w.stop(t); r.Released != 1 || r.Proved != 1 {
		t.Errorf("report %+v, want the hung attempt given back and the next proved", r)
	}
}

// A worker that drains (SIGTERM) gives its job back at once: another worker proves it long
// before the ack wait would have let it.
func TestFarmDrainGivesJobsBack(t *testing.T) {
	srv := startServer(t)
	opts := testOptions()
	opts.AckWait = 30 * time.Second
	fx := fibFixture(t, 1)
	client := connect(t, srv.URL(), opts)
	held := make(chan string, 1)
	w1 := startWorker(t, srv.URL(), "w1", opts, workerHooks{proving: holdFirst(held)})
	subs, err := client.Submit(context.Background(), SubmitRequest{Key: fx.key, Traces: fx.traces, AllowInsecure: true})
	if err != nil {
		t.Fatal(err)
	}
	receive(t, held, "w1 taking up the job")
	start := time.Now()
	r1 := w1.stop(t)
	if r1.Released != 1 || r1.Proved != 0 {
		t.Errorf("draining worker's report %+v, want the job given back", r1)
	}
	if st, err := client.Status(context.Background(), subs[0].ID); err != nil || st.State != StateQueued || !strings.Contains(st.Error, "given back by w1") {
		t.Errorf("status after the drain: %+v, %v", st, err)
	}
	startWorker(t, srv.URL(), "w2", opts, workerHooks{})
	statuses := waitEnded(t, client, []string{subs[0].ID}, 10*time.Second)
	if took := time.Since(start); took >= opts.AckWait {
		t.Errorf("the job given back took %s to be proved: it waited for the ack wait", took)
	}
	checkAllProved(t, client, fx, subs, statuses)
	if st := statuses[subs[0].ID]; st.Attempts != 2 || st.Worker != "w2" {
		t.Errorf("status %+v, want proved by w2 at the second attempt", st)
	}
}

// An unreachable server is an error naming the URL (its password redacted), within the connect
// timeout.
func TestConnectUnreachable(t *testing.T) {
	opts := testOptions()
	start := time.Now()
	_, err := Connect(context.Background(), "nats://farmer:s3cret@127.0.0.1:1", "test", opts)
	if err == nil || !strings.Contains(err.Error(), "nats://farmer:xxxxx@127.0.0.1:1") || strings.Contains(err.Error(), "s3cret") {
		t.Errorf("error %v; want one naming the URL without its password", err)
	}
	if took := time.Since(start); took > opts.ConnectTimeout+time.Second {
		t.Errorf("took %s to fail", took)
	}
	if _, err := Connect(context.Background(), " ", "test", opts); err == nil {
		t.Error("an empty URL connected")
	}
}

// Submit refuses bad inputs before anything is queued: a missing key, an oversized trace, a
// trace that does not fit the key, an insecure key without AllowInsecure.
func TestSubmitChecksFirst(t *testing.T) {
	srv := startServer(t)
	opts := testOptions()
	opts.MaxTraceBytes = 4096
	client := connect(t, srv.URL(), opts)
	fibKey, pairKey, good, big, dir := badInputFiles(t)
	for _, c := range []struct {
		name string
		req  SubmitRequest
		code cmdutil.ExitCode
		want string
	}{
		{"missing key", SubmitRequest{Key: filepath.Join(dir, "none.pk"), Traces: []string{good}}, cmdutil.ExitBadInput, "none.pk"},
		{"insecure key", SubmitRequest{Key: fibKey, Traces: []string{good}}, cmdutil.ExitUsage, "--allow-insecure"},
		{"oversized trace", SubmitRequest{Key: fibKey, Traces: []string{good, big}, AllowInsecure: true}, cmdutil.ExitBadInput, "over the farm's limit"},
		{"trace not of the key", SubmitRequest{Key: pairKey, Traces: []string{good}, AllowInsecure: true}, cmdutil.ExitBadInput, "1 sections for the 2 AIRs proved"},
		{"missing trace", SubmitRequest{Key: fibKey, Traces: []string{filepath.Join(dir, "none.trace")}, AllowInsecure: true}, cmdutil.ExitBadInput, "none.trace"},
		{"bad --airs", SubmitRequest{Key: fibKey, Traces: []string{good}, Airs: "3", AllowInsecure: true}, cmdutil.ExitUsage, "--airs"},
	} {
		_, err := client.Submit(context.Background(), c.req)
		if err == nil || cmdutil.ExitCodeFor(err) != c.code || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v (exit %d), want exit %d naming %q", c.name, err, cmdutil.ExitCodeFor(err), c.code, c.want)
		}
	}
	if st, err := client.Statuses(context.Background()); err != nil || len(st) != 0 {
		t.Errorf("jobs after refused submissions: %v, %v", st, err)
	}
	checkQueueEmpty(t, client)
}
