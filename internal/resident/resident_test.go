package resident

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/metalprove/metalprove/internal/air/testair"
	"github.com/metalprove/metalprove/internal/cmdutil"
	"github.com/metalprove/metalprove/internal/examples"
	"github.com/metalprove/metalprove/internal/prover"
	"github.com/metalprove/metalprove/internal/resident/wire"
	"github.com/metalprove/metalprove/internal/tracefile"
)

// The tests run a server in this process on the host device (as CI does), on a socket in a
// temporary directory, and prove small Fibonacci traces with the test preset.

var hostSettings = &cmdutil.Settings{Device: "host"}

// shortDir is a temporary directory with a path short enough for a Unix socket (at most about
// 100 bytes; t.TempDir's can be longer).
func shortDir(t *testing.T) string {
	t.Helper()
	d, err := os.MkdirTemp("", "mpr")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

// fibTrace writes a Fibonacci trace of 2^logRows rows starting at a, b.
func fibTrace(t *testing.T, path string, a, b uint32, logRows int) {
	t.Helper()
	in := testair.Fibonacci(a, b, 1<<logRows)
	sec := tracefile.Section{SectionHeader: tracefile.SectionHeader{Name: in.Air.Name(), Width: in.Air.Width().MainWidth(), Height: in.Height(), PublicValues: in.Trace.Public}, Data: in.MainCells()}
	if err := tracefile.WriteAll(path, []tracefile.Section{sec}); err != nil {
		t.Fatal(err)
	}
}

// testServer is a server on a resident host device, stopped at the test's end.
type testServer struct {
	*Server
	socket string
	cancel context.CancelFunc
	done   chan error
}

func startServer(t *testing.T, dir string) *testServer {
	t.Helper()
	socket := filepath.Join(dir, "s.sock")
	ln, err := Listen(socket)
	if err != nil {
		t.Fatal(err)
	}
	r, err := prover.OpenResident(hostSettings, 0, nil)
	if err != nil {
		ln.Close()
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &testServer{Server: &Server{Resident: r, Settings: hostSettings}, socket: socket, cancel: cancel, done: make(chan error, 1)}
	go func() { s.done <- s.Serve(ctx, ln) }()
	t.Cleanup(func() { s.stop(t); r.Close() })
	return s
}

// stop stops the server (once) and checks that Serve returned cleanly and removed the socket.
func (s *testServer) stop(t *testing.T) {
	t.Helper()
	if s.cancel == nil {
		return
	}
	s.cancel()
	s.cancel = nil
	select {
	case err := <-s.done:
		if err != nil {
			t.Errorf("Serve: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Serve did not return after its context was cancelled")
	}
	if _, err := os.Lstat(s.socket); !os.IsNotExist(err) {
		t.Errorf("the socket is still there after the server stopped (%v)", err)
	}
}

func testRequest(trace, output string) prover.ProveRequest {
	return prover.ProveRequest{Trace: trace, Output: output, Preset: "test", AllowInsecure: true, Settings: hostSettings}
}

// TestServedProofIsProvesProof: proofs through the resident are byte-identical to a local
// prove's, the second of the same AIRs reuses the kept key (no keygen), and the report's process
// times name the socket.
func TestServedProofIsProvesProof(t *testing.T) {
	dir := shortDir(t)
	s := startServer(t, dir)
	trace := filepath.Join(dir, "fib.trace")
	fibTrace(t, trace, 1, 1, 6)
	local := filepath.Join(dir, "local.proof")
	if _, err := prover.Prove(context.Background(), testRequest(trace, local)); err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile(local)
	if err != nil {
		t.Fatal(err)
	}
	for i, name := range []string{"a.proof", "b.proof"} {
		out := filepath.Join(dir, name)
		rep, err := Prove(context.Background(), s.socket, testRequest(trace, out))
		if err != nil {
			t.Fatalf("proof %d through the resident: %v", i, err)
		}
		got, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("proof %d through the resident differs from the local prove's (%d against %d bytes)", i, len(got), len(want))
		}
		if rep.Output != out || rep.Process.SocketPath != s.socket {
			t.Errorf("report: output %q, socket %q", rep.Output, rep.Process.SocketPath)
		}
		if i == 1 && rep.TimesMS["keygen"] != 0 {
			t.Errorf("the second proof of the same AIRs made its key again (keygen %.3f ms)", rep.TimesMS["keygen"])
		}
	}
	if n := s.Resident.Keys(); n != 1 {
		t.Errorf("the resident keeps %d keys, want 1", n)
	}
	// Another height is another key; a relative trace path is made absolute by the client.
	trace2 := filepath.Join(dir, "fib7.trace")
	fibTrace(t, trace2, 2, 3, 7)
	wd, _ := os.Getwd()
	defer os.Chdir(wd)
	if err := os.Chdir(dir); err != nil {
		t.Fatal(err)
	}
	rep, err := Prove(context.Background(), s.socket, testRequest("fib7.trace", ""))
	if err != nil {
		t.Fatal(err)
	}
	if rep.Output != filepath.Join(dir, "fib7.proof") {
		t.Errorf("default output %q", rep.Output)
	}
	if n := s.Resident.Keys(); n != 2 {
		t.Errorf("the resident keeps %d keys, want 2", n)
	}
	if st := s.Stats(); st.Proved != 3 || st.Failed != 0 {
		t.Errorf("stats %+v, want 3 proved", st)
	}
}

// TestServedProofWithKeyFile: a proof with --key through the resident equals a local one; the
// key file is read and made once while unchanged, again once rewritten.
func TestServedProofWithKeyFile(t *testing.T) {
	dir := shortDir(t)
	s := startServer(t, dir)
	key := filepath.Join(dir, "fib.pk")
	if _, err := prover.Keygen(prover.KeygenRequest{Example: "fibonacci", Rows: 32, Output: key, Preset: "test", AllowInsecure: true, Version: "test"}); err != nil {
		t.Fatal(err)
	}
	trace := filepath.Join(dir, "fib.trace")
	fibTrace(t, trace, 0, 1, 5)
	keyReq := func(out string) prover.ProveRequest {
		return prover.ProveRequest{Trace: trace, Key: key, Output: out, AllowInsecure: true, Settings: hostSettings}
	}
	local := filepath.Join(dir, "local.proof")
	if _, err := prover.Prove(context.Background(), keyReq(local)); err != nil {
		t.Fatal(err)
	}
	want, _ := os.ReadFile(local)
	for i := range 3 {
		if i == 2 { // rewritten: a new modification time
			later := time.Now().Add(time.Minute)
			if err := os.Chtimes(key, later, later); err != nil {
				t.Fatal(err)
			}
		}
		out := filepath.Join(dir, "served.proof")
		if _, err := Prove(context.Background(), s.socket, keyReq(out)); err != nil {
			t.Fatalf("proof %d: %v", i, err)
		}
		if got, _ := os.ReadFile(out); !bytes.Equal(got, want) {
			t.Fatalf("proof %d with the key through the resident differs from the local one", i)
		}
		if n, wantKeys := s.Resident.Keys(), 1+i/2; n != wantKeys {
			t.Errorf("after proof %d the resident keeps %d keys, want %d", i, n, wantKeys)
		}
	}
	// Without --allow-insecure the kept key is refused as a fresh read would be.
	req := keyReq(filepath.Join(dir, "no.proof"))
	req.AllowInsecure = false
	if _, err := Prove(context.Background(), s.socket, req); cmdutil.ExitCodeFor(err) != cmdutil.ExitUsage || !strings.Contains(err.Error(), "INSECURE") {
		t.Errorf("insecure key without --allow-insecure: %v", err)
	}
}

// TestServedErrorsKeepTheirClass: a failed proof's error reaches the client with its exit
// status, and leaves no file; no server at the socket is a DeviceError.
func TestServedErrorsKeepTheirClass(t *testing.T) {
	dir := shortDir(t)
	s := startServer(t, dir)
	missing := filepath.Join(dir, "missing.trace")
	_, err := Prove(context.Background(), s.socket, testRequest(missing, ""))
	if cmdutil.ExitCodeFor(err) != cmdutil.ExitBadInput || !strings.Contains(err.Error(), "missing.trace") {
		t.Errorf("missing trace: %v (exit %d)", err, cmdutil.ExitCodeFor(err))
	}
	bad := filepath.Join(dir, "bad.trace")
	if err := os.WriteFile(bad, []byte("not a trace"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = Prove(context.Background(), s.socket, testRequest(bad, ""))
	if cmdutil.ExitCodeFor(err) != cmdutil.ExitBadInput {
		t.Errorf("malformed trace: %v (exit %d)", err, cmdutil.ExitCodeFor(err))
	}
	if _, err := os.Stat(filepath.Join(dir, "bad.proof")); !os.IsNotExist(err) {
		t.Errorf("a failed proof left a file (%v)", err)
	}
	trace := filepath.Join(dir, "fib.trace")
	fibTrace(t, trace, 1, 1, 5)
	req := testRequest(trace, "")
	req.AllowInsecure = false // the client refuses the test preset before it connects
	if _, err := Prove(context.Background(), s.socket, req); cmdutil.ExitCodeFor(err) != cmdutil.ExitUsage {
		t.Errorf("insecure preset: %v", err)
	}
	if _, err := Prove(context.Background(), filepath.Join(dir, "none.sock"), testRequest(trace, "")); cmdutil.ExitCodeFor(err) != cmdutil.ExitDevice || !strings.Contains(err.Error(), "metalprove serve") {
		t.Errorf("no server: %v", err)
	}
	if st := s.Stats(); st.Failed != 2 {
		t.Errorf("stats %+v, want 2 failed", st)
	}
}

// TestServerRefusesMalformedRequests: requests not of the protocol get an error line with a
// usage status, and the server goes on.
func TestServerRefusesMalformedRequests(t *testing.T) {
	dir := shortDir(t)
	s := startServer(t, dir)
	for _, tc := range []struct{ name, line, want string }{
		{"not JSON", "hello", "protocol"},
		{"unknown field", `{"version":1,"trace":"/a","output":"/b","params":null,"nope":1}`, "unknown field"},
		{"version", `{"version":2,"trace":"/a","output":"/b"}`, "version 2"},
		{"relative trace", `{"version":1,"trace":"a.trace","output":"/b","key":"/k"}`, "absolute"},
		{"no params", `{"version":1,"trace":"/a","output":"/b"}`, "neither a key nor parameters"},
		{"two objects", `{"version":1} {}`, "more than one"},
	} {
		conn, err := net.Dial("unix", s.socket)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := conn.Write([]byte(tc.line + "\n")); err != nil {
			t.Fatal(err)
		}
		line, err := wire.ReadLine(bufio.NewReader(conn))
		conn.Close()
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		var resp wire.Response
		if err := wire.Decode(line, &resp); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if resp.ExitCode != int(cmdutil.ExitUsage) || !strings.Contains(resp.Error, tc.want) {
			t.Errorf("%s: answer %+v, want an exit-2 error containing %q", tc.name, resp, tc.want)
		}
	}
	if st := s.Stats(); st.Failed != 6 || st.Proved != 0 {
		t.Errorf("stats %+v", st)
	}
}

// TestHangUpCancelsTheProof: a client whose context ends hangs up; its proof stops without a
// file, and the next proof is written. The proof cut is a keccakf-16 one under app-100bit
// (about 1.5 s on the host device), cut a quarter of a second after it was asked for.
func TestHangUpCancelsTheProof(t *testing.T) {
	if testing.Short() {
		t.Skip("a keccakf-16 proof on the host device")
	}
	dir := shortDir(t)
	s := startServer(t, dir)
	trace := filepath.Join(dir, "k16.trace")
	e, err := examples.Lookup("keccakf")
	if err != nil {
		t.Fatal(err)
	}
	secs, err := e.Generate(examples.Options{Perms: 16})
	if err != nil {
		t.Fatal(err)
	}
	out := make([]tracefile.Section, len(secs))
	for i, sc := range secs {
		out[i] = tracefile.Section{SectionHeader: tracefile.SectionHeader{Name: sc.Name, Width: sc.Width(), Height: sc.Height, PublicValues: sc.Public}, Data: sc.Cells}
	}
	if err := tracefile.WriteAll(trace, out); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	req := prover.ProveRequest{Trace: trace, Output: filepath.Join(dir, "cut.proof"), Settings: hostSettings}
	done := make(chan error, 1)
	go func() {
		_, err := Prove(ctx, s.socket, req)
		done <- err
	}()
	time.Sleep(250 * time.Millisecond)
	cancel()
	if err := <-done; !errors.Is(err, cmdutil.ErrInterrupted) {
		t.Fatalf("hung up: %v, want ErrInterrupted", err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for s.Stats().Failed < 1 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if st := s.Stats(); st.Failed != 1 || st.Proved != 0 {
		t.Errorf("stats %+v: the proof was not cancelled", st)
	}
	if _, err := os.Stat(req.Output); !os.IsNotExist(err) {
		t.Errorf("a cancelled proof left its file (%v)", err)
	}
	fib := filepath.Join(dir, "fib.trace")
	fibTrace(t, fib, 1, 1, 5)
	if _, err := Prove(context.Background(), s.socket, testRequest(fib, filepath.Join(dir, "next.proof"))); err != nil {
		t.Fatalf("the proof after a hang-up: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "next.proof")); err != nil {
		t.Error(err)
	}
}

// TestListen: a live socket is refused, a stale one replaced, another file refused.
func TestListen(t *testing.T) {
	dir := shortDir(t)
	path := filepath.Join(dir, "l.sock")
	ln, err := Listen(path)
	if err != nil {
		t.Fatal(err)
	}
	if st, err := os.Lstat(path); err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("socket mode %v (%v), want 0600", st.Mode().Perm(), err)
	}
	if _, err := Listen(path); cmdutil.ExitCodeFor(err) != cmdutil.ExitUsage || !strings.Contains(err.Error(), "already listening") {
		t.Errorf("second Listen: %v", err)
	}
	ln.(*net.UnixListener).SetUnlinkOnClose(false)
	ln.Close() // leaves a stale socket file
	if _, err := os.Lstat(path); err != nil {
		t.Fatal(err)
	}
	ln, err = Listen(path)
	if err != nil {
		t.Fatalf("Listen over a stale socket: %v", err)
	}
	ln.Close()
	plain := filepath.Join(dir, "plain")
	if err := os.WriteFile(plain, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Listen(plain); err == nil || !strings.Contains(err.Error(), "not a socket") {
		t.Errorf("Listen over a plain file: %v", err)
	}
	if _, err := os.Stat(plain); err != nil {
		t.Errorf("Listen removed a plain file: %v", err)
	}
}
