package cmd

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
)

// TestServeAndProveThroughIt runs `metalprove serve` as the binary does until SIGTERM, proves
// through it with `prove --socket` (and METALPROVE_SOCKET), compares the proof with a local
// prove's, and checks the flags' errors.
func TestServeAndProveThroughIt(t *testing.T) {
	cmdtest.ClearEnv(t)
	dir, err := os.MkdirTemp("", "mpc") // a short path: a Unix socket's is limited
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	socket := filepath.Join(dir, "s.sock")
	trace := filepath.Join(dir, "fib.trace")
	mustRun(t, cmdutil.ExitOK, "trace", "--example", "fibonacci", "--rows", "64", "-o", trace)

	code, _, errOut, _ := run(t, "serve")
	if code != cmdutil.ExitUsage || !strings.Contains(errOut.String(), "--socket is required") {
		t.Errorf("serve without --socket: exit %d, %s", code, errOut)
	}
	code, _, errOut, _ = run(t, "prove", "--socket", socket, "--cpuref", "--trace", trace)
	if code != cmdutil.ExitUsage || !strings.Contains(errOut.String(), "--socket and --cpuref conflict") {
		t.Errorf("prove --socket --cpuref: exit %d, %s", code, errOut)
	}
	code, _, errOut, _ = run(t, "prove", "--socket", socket, "--trace", trace, "--preset", "test", "--allow-insecure")
	if code != cmdutil.ExitDevice || !strings.Contains(errOut.String(), "metalprove serve --socket "+socket) {
		t.Errorf("prove with no server: exit %d, %s", code, errOut)
	}

	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	ios, _, serveOut, serveErr := cmdutil.TestStreams()
	exit := make(chan cmdutil.ExitCode, 1)
	go func() {
		exit <- RunContext(ctx, cmdutil.NewFactory("v9.9.9-test", ios), []string{"--device", "host", "serve", "--socket", socket, "--json"})
	}()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if _, err := os.Lstat(socket); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no socket after 30 s; serve's stderr: %s", serveErr)
		}
	}
	code, _, errOut, _ = run(t, "serve", "--socket", socket)
	if code != cmdutil.ExitUsage || !strings.Contains(errOut.String(), "already listening") {
		t.Errorf("a second serve on the socket: exit %d, %s", code, errOut)
	}

	served := filepath.Join(dir, "served.proof")
	out, _ := mustRun(t, cmdutil.ExitOK, "prove", "--socket", socket, "--trace", trace, "-o", served, "--preset", "test", "--allow-insecure", "--json")
	var rep struct {
		Output  string
		Process struct {
			Socket    string  `json:"socket"`
			ServiceMS float64 `json:"service_ms"`
			ReadMS    float64 `json:"read_ms"`
		}
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("prove --json: %v\n%s", err, out)
	}
	if rep.Output != served || rep.Process.Socket != socket || rep.Process.ReadMS <= 0 {
		t.Errorf("report %+v", rep)
	}
	t.Setenv("METALPROVE_SOCKET", socket)
	again := filepath.Join(dir, "again.proof")
	mustRun(t, cmdutil.ExitOK, "prove", "--trace", trace, "-o", again, "--preset", "test", "--allow-insecure")
	os.Unsetenv("METALPROVE_SOCKET")
	local := filepath.Join(dir, "local.proof")
	mustRun(t, cmdutil.ExitOK, "--device", "host", "prove", "--trace", trace, "-o", local, "--preset", "test", "--allow-insecure")
	want := readFile(t, local)
	for _, p := range []string{served, again} {
		if !bytes.Equal(readFile(t, p), want) {
			t.Errorf("%s differs from the local prove's proof", p)
		}
	}
	mustRun(t, cmdutil.ExitOK, "verify", served, "--allow-insecure")

	stop()
	select {
	case code := <-exit:
		if code != cmdutil.ExitInterrupted {
			t.Errorf("serve stopped with exit %d, want %d; stderr %s", code, cmdutil.ExitInterrupted, serveErr)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("serve did not stop")
	}
	var srep struct {
		Socket         string
		Proved, Failed int
		Keys           int
	}
	if err := json.Unmarshal(serveOut.Bytes(), &srep); err != nil {
		t.Fatalf("serve --json: %v\n%s", err, serveOut)
	}
	if srep.Socket != socket || srep.Proved != 2 || srep.Failed != 0 || srep.Keys != 1 {
		t.Errorf("serve's report %+v", srep)
	}
	if _, err := os.Lstat(socket); !os.IsNotExist(err) {
		t.Errorf("the socket is left after serve stopped (%v)", err)
	}
}
