package farm

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/metalprove/metalprove/internal/air/testair"
	"github.com/metalprove/metalprove/internal/cmdutil"
	"github.com/metalprove/metalprove/internal/examples"
	"github.com/metalprove/metalprove/internal/farm/embedded"
	"github.com/metalprove/metalprove/internal/field"
	"github.com/metalprove/metalprove/internal/prover"
	"github.com/metalprove/metalprove/internal/tracefile"
)

// The farm's tests run a real JetStream server on 127.0.0.1 (internal/farm/embedded) with its
// files under t.TempDir(), workers in this process proving on the host device, and the
// timings shortened (testOptions) so that a redelivery takes a second or two.

// hostSettings prove on the host device, as CI does.
var hostSettings = &cmdutil.Settings{Device: "host"}

// testOptions are DefaultOptions with the timings of a test.
func testOptions() Options {
	o := DefaultOptions()
	o.AckWait = 1500 * time.Millisecond
	o.Heartbeat = 300 * time.Millisecond
	o.RetryFor = 30 * time.Second
	o.ConnectTimeout = 2 * time.Second
	o.RequestTimeout = 5 * time.Second
	o.FetchWait = 200 * time.Millisecond
	o.ReconnectWait = 100 * time.Millisecond
	return o
}

// startServer starts an embedded server for the test, stopped at its end.
func startServer(t *testing.T) *embedded.Server {
	t.Helper()
	srv, err := embedded.Start(t.TempDir(), 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Stop() })
	return srv
}

// connect connects a client to the server at url, closed at the test's end.
func connect(t *testing.T, url string, opts Options) *Farm {
	t.Helper()
	f, err := Connect(context.Background(), url, "test client", opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Close)
	return f
}

// testWorker is a worker running in the test, on a connection of its own.
type testWorker struct {
	*Worker
	cancel context.CancelFunc
	done   chan WorkerReport
}

// startWorker starts a worker named name with hooks; it is stopped (drained) at the test's end
// unless stopped or killed before.
func startWorker(t *testing.T, url, name string, opts Options, hooks workerHooks) *testWorker {
	t.Helper()
	f, err := Connect(context.Background(), url, "test worker "+name, opts)
	if err != nil {
		t.Fatal(err)
	}
	log := zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.InfoLevel)
	w := NewWorker(f, WorkerConfig{Name: name, Concurrency: 1, Settings: hostSettings, Logger: &log, WorkDir: t.TempDir()})
	w.hooks = hooks
	ctx, cancel := context.WithCancel(context.Background())
	tw := &testWorker{Worker: w, cancel: cancel, done: make(chan WorkerReport, 1)}
	started := make(chan struct{})
	go func() {
		close(started)
		r, err := w.Run(ctx)
		if err != nil {
			t.Errorf("worker %s: %v", name, err)
		}
		f.Close()
		tw.done <- r
	}()
	<-started
	t.Cleanup(func() { tw.stop(t) })
	return tw
}

// stop drains the worker and waits for it; it returns the worker's report.
func (tw *testWorker) stop(t *testing.T) WorkerReport {
	t.Helper()
	tw.cancel()
	select {
	case r := <-tw.done:
		tw.done <- r // for a later stop
		return r
	case <-time.After(30 * time.Second):
		t.Fatalf("worker %s did not stop within 30 s", tw.cfg.Name)
	}
	return WorkerReport{}
}

// killWorker kills the worker as SIGKILL would and waits until it has stopped.
func (tw *testWorker) killWorker(t *testing.T) WorkerReport {
	t.Helper()
	tw.kill()
	return tw.stop(t)
}

// holdFirst is a hook that, on its first call, sends the job's id on ch and holds the job until
// the worker stops (is killed or drained); later calls pass.
func holdFirst(ch chan<- string) func(ctx context.Context, id string) {
	var once sync.Once
	return func(ctx context.Context, id string) {
		first := false
		once.Do(func() { first = true })
		if first {
			ch <- id
			<-ctx.Done()
		}
	}
}

// receive waits for a value on ch.
func receive(t *testing.T, ch <-chan string, what string) string {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(60 * time.Second):
		t.Fatalf("%s: nothing within 60 s", what)
	}
	return ""
}

// fixture is a proving key and trace files, with the proofs `prove` makes of them directly.
type fixture struct {
	dir    string
	key    string
	traces []string
	proofs map[string][]byte // by trace path
}

// fibFixture makes a fibonacci key (test preset) and n fibonacci traces of 16 rows, each with
// its own first values (so that each proof differs), and proves each directly on the host
// device.
func fibFixture(t *testing.T, n int) *fixture {
	t.Helper()
	fx := &fixture{dir: t.TempDir(), proofs: map[string][]byte{}}
	fx.key = makeKey(t, fx.dir, "fibonacci", 16)
	for i := range n {
		in := testair.Fibonacci(uint32(i), uint32(i+1), 16)
		path := filepath.Join(fx.dir, "fib"+itoa(i)+".trace")
		writeTrace(t, path, []examples.Section{{Name: in.Air.Name(), Air: in.Air, Height: in.Height(), Cells: in.MainCells(), Public: in.Trace.Public}})
		fx.traces = append(fx.traces, path)
		fx.proofs[path] = proveDirect(t, fx.key, path, true)
	}
	return fx
}

func itoa(i int) string { return string(rune('a'+i/26)) + string(rune('a'+i%26)) }

// makeKey writes the proving key of a built-in example under the test preset (keccakf: its
// own default preset).
func makeKey(t *testing.T, dir, example string, rows int) string {
	t.Helper()
	path := filepath.Join(dir, example+".pk")
	req := prover.KeygenRequest{Example: example, Rows: rows, Output: path, Preset: "test", AllowInsecure: true, Version: "test"}
	if example == "keccakf" {
		req.Rows, req.Preset, req.AllowInsecure = 0, "", false
	}
	if _, err := prover.Keygen(req); err != nil {
		t.Fatal(err)
	}
	return path
}

// writeTrace writes sections as a trace file.
func writeTrace(t *testing.T, path string, secs []examples.Section) {
	t.Helper()
	out := make([]tracefile.Section, len(secs))
	for i, s := range secs {
		out[i] = tracefile.Section{SectionHeader: tracefile.SectionHeader{Name: s.Name, Width: s.Width(), Height: s.Height, PublicValues: s.Public}, Data: s.Cells}
	}
	if err := tracefile.WriteAll(path, out); err != nil {
		t.Fatal(err)
	}
}

// writeExampleTrace writes the trace of a built-in example.
func writeExampleTrace(t *testing.T, path, example string, opts examples.Options) {
	t.Helper()
	e, err := examples.Lookup(example)
	if err != nil {
		t.Fatal(err)
	}
	secs, err := e.Generate(opts)
	if err != nil {
		t.Fatal(err)
	}
	writeTrace(t, path, secs)
}

// proveDirect proves a trace with a key as `metalprove prove --key` does, on the host device.
func proveDirect(t *testing.T, key, trace string, insecure bool) []byte {
	t.Helper()
	out := filepath.Join(t.TempDir(), "direct.proof")
	if _, err := prover.Prove(context.Background(), prover.ProveRequest{Trace: trace, Key: key, Output: out, AllowInsecure: insecure, Settings: hostSettings}); err != nil {
		t.Fatalf("direct prove of %s: %v", trace, err)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// verifyProof verifies proof bytes against key as `metalprove verify --key` does.
func verifyProof(t *testing.T, key string, proof []byte, insecure bool) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "fetched.proof")
	if err := os.WriteFile(path, proof, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := prover.Verify(prover.VerifyRequest{Proof: path, Key: key, AllowInsecure: insecure}); err != nil {
		t.Errorf("the farm's proof does not verify: %v", err)
	}
}

// waitEnded waits until every job of ids has ended (done or failed) and returns their statuses.
func waitEnded(t *testing.T, f *Farm, ids []string, within time.Duration) map[string]*Status {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		out := map[string]*Status{}
		pending := 0
		for _, id := range ids {
			st, err := f.Status(context.Background(), id)
			if err != nil {
				pending++ // the server may be restarting
				continue
			}
			out[id] = st
			if !st.Ended() {
				pending++
			}
		}
		if pending == 0 {
			return out
		}
		if time.Now().After(deadline) {
			for id, st := range out {
				if !st.Ended() {
					t.Logf("job %s: %+v", id, st)
				}
			}
			t.Fatalf("%d of %d jobs have not ended within %s", pending, len(ids), within)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// checkAllProved checks that each submitted job is done with exactly one stored proof,
// byte-identical to the direct proof of its trace, which verifies; that no trace is left in
// the store; and that the queue is empty: nothing waiting, nothing in flight.
func checkAllProved(t *testing.T, f *Farm, fx *fixture, subs []Submitted, statuses map[string]*Status) {
	t.Helper()
	ctx := context.Background()
	want := map[string]bool{}
	for _, s := range subs {
		want[ProofObjectPrefix+s.ID] = true
		st := statuses[s.ID]
		if st.State != StateDone || st.Proof == nil || st.Proof.Name != ProofObjectPrefix+s.ID {
			t.Errorf("job %s (%s): %+v, want done with proof %s", s.ID, s.Trace, st, ProofObjectPrefix+s.ID)
			continue
		}
		proof, _, err := f.ReadProof(ctx, s.ID)
		if err != nil {
			t.Errorf("job %s: %v", s.ID, err)
			continue
		}
		if !bytes.Equal(proof, fx.proofs[s.Trace]) {
			t.Errorf("job %s (%s): the farm's proof (%d bytes) differs from the direct proof (%d bytes)", s.ID, s.Trace, len(proof), len(fx.proofs[s.Trace]))
		}
		verifyProof(t, fx.key, proof, true)
	}
	names, err := f.ProofObjects(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(names) != len(want) {
		t.Errorf("%d proofs stored, want %d (one per job): %v", len(names), len(want), names)
	}
	for _, n := range names {
		if !want[n] {
			t.Errorf("stored proof %s is no submitted job's", n)
		}
	}
	// A worker writes a job's done status before it acknowledges the delivery and removes the
	// trace: both follow the status by a moment, so they are waited for.
	settles(t, 10*time.Second, func() error {
		traces, err := f.objectNames(ctx, TraceObjectPrefix)
		if err != nil {
			return err
		}
		if len(traces) != 0 {
			return fmt.Errorf("traces left in the store after their jobs ended: %v", traces)
		}
		return nil
	})
	checkQueueEmpty(t, f)
}

// checkQueueEmpty checks that no job is left in the stream, waiting or in flight, once the
// last acknowledgement has reached the server.
func checkQueueEmpty(t *testing.T, f *Farm) {
	t.Helper()
	settles(t, 10*time.Second, func() error {
		q, err := f.Queue(context.Background())
		if err != nil {
			return err
		}
		if q.Messages != 0 || q.Waiting != 0 || q.InFlight != 0 {
			return fmt.Errorf("queue not empty: %+v", q)
		}
		return nil
	})
}

// settles polls check until it returns nil, failing the test with its last error if it has
// not within the given time.
func settles(t *testing.T, within time.Duration, check func() error) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		err := check()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("after %s: %v", within, err)
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// fieldOf is a field element of v.
func fieldOf(v uint32) field.Fp { return field.New(v) }
