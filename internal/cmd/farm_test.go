package cmd

// The proving farm's commands end to end on a real JetStream server on 127.0.0.1
// (internal/farm/embedded): submit, a worker on the host device, jobs --wait, fetch; the proofs
// byte-identical to prove's and verified; the errors of bad flags, an unreachable server and an
// unknown job.

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/metalprove/metalprove/internal/cmdutil"
	"github.com/metalprove/metalprove/internal/cmdutil/cmdtest"
	"github.com/metalprove/metalprove/internal/farm/embedded"
)

func TestFarmCommands(t *testing.T) {
	cmdtest.ClearEnv(t)
	srv, err := embedded.Start(t.TempDir(), 0)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	url := srv.URL()
	dir := t.TempDir()
	pk := filepath.Join(dir, "pair.pk")
	mustRun(t, cmdutil.ExitOK, "keygen", "--example", "interaction-pair", "--rows", "4", "--preset", "test", "--allow-insecure", "-o", pk)
	var traces []string
	for _, seed := range []string{"1", "2"} {
		tr := filepath.Join(dir, "pair"+seed+".trace")
		mustRun(t, cmdutil.ExitOK, "trace", "--example", "interaction-pair", "--rows", "4", "--seed", seed, "-o", tr)
		traces = append(traces, tr)
	}

	// Bad flags and an unreachable server: clear errors, no hang.
	code, _, errOut, _ := run(t, append([]string{"submit", "--key", pk, "--allow-insecure"}, traces...)...)
	if code != cmdutil.ExitUsage || !strings.Contains(errOut.String(), "--nats is required") {
		t.Errorf("submit without --nats: exit %d, %s", code, errOut)
	}
	start := time.Now()
	code, _, errOut, _ = run(t, append([]string{"submit", "--nats", "nats://127.0.0.1:1", "--key", pk, "--allow-insecure"}, traces...)...)
	if code != cmdutil.ExitError || !strings.Contains(errOut.String(), "NATS server nats://127.0.0.1:1: cannot connect") || time.Since(start) > 10*time.Second {
		t.Errorf("submit to an unreachable server: exit %d after %s, %s", code, time.Since(start), errOut)
	}
	code, _, errOut, _ = run(t, "--device", "host", "worker", "--nats", url, "--concurrency", "0")
	if code != cmdutil.ExitUsage || !strings.Contains(errOut.String(), "--concurrency 0") {
		t.Errorf("worker --concurrency 0: exit %d, %s", code, errOut)
	}
	code, _, errOut, _ = run(t, "--device", "host", "worker", "--nats", url, "--gpus", "0,1")
	if code != cmdutil.ExitUsage || !strings.Contains(errOut.String(), "--gpus applies to --device cuda") {
		t.Errorf("worker --gpus on the host device: exit %d, %s", code, errOut)
	}
	code, _, errOut, _ = run(t, "fetch", "--nats", url, "-o", filepath.Join(dir, "none"), "0123456789abcdef0123")
	if code != cmdutil.ExitUsage || !strings.Contains(errOut.String(), "none") {
		t.Errorf("fetch into a missing directory: exit %d, %s", code, errOut)
	}

	// A worker, as `metalprove worker` runs until SIGTERM.
	ctx, stopWorker := context.WithCancel(context.Background())
	defer stopWorker()
	ios, _, workerOut, workerErr := cmdutil.TestStreams()
	workerExit := make(chan cmdutil.ExitCode, 1)
	go func() {
		workerExit <- RunContext(ctx, cmdutil.NewFactory("v9.9.9-test", ios), []string{"--device", "host", "worker", "--nats", url, "--name", "cli-worker", "--json"})
	}()

	out, _ := mustRun(t, cmdutil.ExitOK, append([]string{"submit", "--nats", url, "--key", pk, "--allow-insecure", "--json"}, traces...)...)
	var sub struct {
		Jobs []struct{ ID, Trace string }
	}
	if err := json.Unmarshal([]byte(out), &sub); err != nil || len(sub.Jobs) != 2 {
		t.Fatalf("submit --json: %v\n%s", err, out)
	}
	ids := []string{sub.Jobs[0].ID, sub.Jobs[1].ID}

	// METALPROVE_NATS stands for --nats.
	t.Setenv("METALPROVE_NATS", url)
	out, _ = mustRun(t, cmdutil.ExitOK, append([]string{"jobs", "--wait", "--json"}, ids...)...)
	var jobs struct {
		Jobs []struct {
			ID, State, Worker string
			Attempts          int
		}
		Queue struct{ Messages, Waiting, InFlight uint64 }
	}
	if err := json.Unmarshal([]byte(out), &jobs); err != nil || len(jobs.Jobs) != 2 {
		t.Fatalf("jobs --json: %v\n%s", err, out)
	}
	for _, j := range jobs.Jobs {
		if j.State != "done" || j.Worker != "cli-worker" || j.Attempts != 1 {
			t.Errorf("job %+v, want done by cli-worker at its first attempt", j)
		}
	}
	// A worker acknowledges a delivery just after writing its done status: the queue empties a
	// moment after `jobs --wait` returns.
	for deadline := time.Now().Add(10 * time.Second); jobs.Queue.Messages != 0 || jobs.Queue.InFlight != 0; {
		if time.Now().After(deadline) {
			t.Errorf("queue %+v, want empty", jobs.Queue)
			break
		}
		time.Sleep(20 * time.Millisecond)
		out, _ = mustRun(t, cmdutil.ExitOK, append([]string{"jobs", "--json"}, ids...)...)
		if err := json.Unmarshal([]byte(out), &jobs); err != nil {
			t.Fatalf("jobs --json: %v\n%s", err, out)
		}
	}
	t.Setenv("METALPROVE_NATS", "")
	os.Unsetenv("METALPROVE_NATS")
	// So does the config file's top-level nats key, for every farm command.
	out, _ = mustRun(t, cmdutil.ExitOK, "--config", writeConfig(t, "nats: "+url+"\n"), "jobs")
	for _, want := range append([]string{"STATE", "done", "pair1.trace", "queue: 0 waiting, 0 in flight"}, ids...) {
		if !strings.Contains(out, want) {
			t.Errorf("jobs table lacks %q:\n%s", want, out)
		}
	}

	fetched := t.TempDir()
	out, _ = mustRun(t, cmdutil.ExitOK, append([]string{"fetch", "--nats", url, "-o", fetched}, ids...)...)
	for i, id := range ids {
		path := filepath.Join(fetched, id+".proof")
		if !strings.Contains(out, path) {
			t.Errorf("fetch output lacks %s:\n%s", path, out)
		}
		direct := filepath.Join(dir, "direct.proof")
		mustRun(t, cmdutil.ExitOK, "--device", "host", "prove", "--key", pk, "--allow-insecure", "--trace", traces[i], "-o", direct)
		if !bytes.Equal(readFile(t, path), readFile(t, direct)) {
			t.Errorf("job %s: the farm's proof differs from prove's", id)
		}
		mustRun(t, cmdutil.ExitOK, "verify", "--key", pk, "--allow-insecure", path)
	}
	code, out2, errOut, _ := run(t, "fetch", "--nats", url, "-o", fetched, "0123456789abcdef0123", "--json")
	if code != cmdutil.ExitBadInput || !strings.Contains(errOut.String(), "no such job") || !strings.Contains(out2.String(), `"exit_code": 3`) {
		t.Errorf("fetch of an unknown job: exit %d, stdout %s, stderr %s", code, out2, errOut)
	}
	code, _, errOut, _ = run(t, "jobs", "--nats", url, "../x")
	if code != cmdutil.ExitUsage || !strings.Contains(errOut.String(), "job id") {
		t.Errorf("jobs with a malformed id: exit %d, %s", code, errOut)
	}

	// SIGTERM: the worker drains, prints its report and exits 130.
	stopWorker()
	select {
	case code := <-workerExit:
		if code != cmdutil.ExitInterrupted {
			t.Errorf("worker: exit %d after SIGTERM, want %d; stderr %s", code, cmdutil.ExitInterrupted, workerErr)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the worker did not stop within 30 s of its interrupt")
	}
	var rep struct{ Worker string }
	var counts struct{ Proved, Failed int }
	if err := json.Unmarshal(workerOut.Bytes(), &rep); err != nil || rep.Worker != "cli-worker" {
		t.Errorf("worker --json: %v\n%s", err, workerOut)
	}
	_ = json.Unmarshal(workerOut.Bytes(), &counts)
	if counts.Proved != 2 || counts.Failed != 0 {
		t.Errorf("worker report %s, want 2 proved", workerOut)
	}
}
