package resident

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/metalprove/metalprove/internal/cmdutil"
	"github.com/metalprove/metalprove/internal/prover"
	"github.com/metalprove/metalprove/internal/resident/wire"
)

// requestTimeout bounds the wait for a connection's request line.
const requestTimeout = 10 * time.Second

// Listen makes the Unix socket at path (mode 0600). A socket file left by a server that is gone
// is replaced; one a server still answers on is an error naming it, as is any other file there.
func Listen(path string) (net.Listener, error) {
	if path == "" {
		return nil, cmdutil.Usagef("--socket is required: the path of the Unix socket to listen on")
	}
	if st, err := os.Lstat(path); err == nil {
		if st.Mode()&os.ModeSocket == 0 {
			return nil, cmdutil.Usagef("--socket %s: a file that is not a socket is there", path)
		}
		if c, err := net.DialTimeout("unix", path, time.Second); err == nil {
			c.Close()
			return nil, cmdutil.Usagef("--socket %s: a resident prover is already listening there", path)
		}
		if err := os.Remove(path); err != nil {
			return nil, fmt.Errorf("--socket %s: removing the stale socket: %w", path, cmdutil.UnwrapPath(err))
		}
	}
	// The socket is made with no permission for others, then opened to the owner alone: the
	// server proves and writes files as its user for whoever connects.
	old := umask(0o177)
	ln, err := net.Listen("unix", path)
	umask(old)
	if err != nil {
		return nil, cmdutil.Usagef("--socket %s: %v", path, cmdutil.UnwrapPath(err))
	}
	if ul, ok := ln.(*net.UnixListener); ok {
		ul.SetUnlinkOnClose(true)
	}
	return ln, nil
}

// Stats counts what a server did.
type Stats struct {
	Proved int64 `json:"proved"`
	Failed int64 `json:"failed"`
}

// Server proves the requests of a listener's connections on one resident backend.
type Server struct {
	Resident *prover.Resident
	// Settings are the server's (device memory limit, config file it refuses to overwrite).
	Settings *cmdutil.Settings
	// Log gets one record per request (nil: none).
	Log *zerolog.Logger

	proved, failed atomic.Int64
}

// Stats are the server's counts so far.
func (s *Server) Stats() Stats { return Stats{Proved: s.proved.Load(), Failed: s.failed.Load()} }

// Serve accepts connections on ln until ctx is done, then closes ln, cancels the proofs in
// progress and returns once their connections are answered.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	var wg sync.WaitGroup
	defer wg.Wait()
	stop := context.AfterFunc(ctx, func() { ln.Close() })
	defer stop()
	for {
		conn, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			ln.Close()
			return fmt.Errorf("resident: accept: %w", err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.handle(ctx, conn)
		}()
	}
}

// handle answers one connection: its request proved, its answer written.
func (s *Server) handle(ctx context.Context, conn net.Conn) {
	defer conn.Close()
	log := s.Log
	if log == nil {
		n := zerolog.Nop()
		log = &n
	}
	out := &lockedWriter{w: conn}
	r := bufio.NewReaderSize(conn, 64<<10)
	conn.SetReadDeadline(time.Now().Add(requestTimeout))
	var req wire.Request
	line, err := wire.ReadLine(r)
	if errors.Is(err, io.EOF) { // a connection that asked nothing (Listen's probe of a live socket)
		return
	}
	if err == nil {
		err = wire.Decode(line, &req)
	}
	if err == nil {
		err = req.Check()
	}
	var params *prover.Resolved
	if err == nil && req.Key == "" {
		params = new(prover.Resolved)
		err = wire.Decode(req.Params, params)
	}
	if err != nil {
		s.failed.Add(1)
		log.Warn().Err(err).Msg("request refused")
		wire.WriteLine(out, wire.Response{Error: err.Error(), ExitCode: int(cmdutil.ExitCodeFor(usage(err)))})
		return
	}
	conn.SetReadDeadline(time.Time{})
	// The proof stops when the server stops or the client hangs up (it sends nothing more: a
	// read returns only at its end).
	pctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		var b [1]byte
		r.Read(b[:])
		cancel()
	}()
	plog := zerolog.Nop()
	if lvl, err := zerolog.ParseLevel(req.LogLevel); err == nil && req.LogLevel != "" {
		plog = zerolog.New(recordWriter{out}).Level(lvl).With().Timestamp().Logger()
	}
	start := time.Now()
	log.Info().Str("trace", req.Trace).Str("output", req.Output).Msg("proving")
	rep, err := prover.Prove(pctx, prover.ProveRequest{
		Trace: req.Trace, Output: req.Output, Key: req.Key, Airs: req.Airs, Resolved: params,
		AllowInsecure: req.AllowInsecure, NoCheck: req.NoCheck,
		Settings: s.Settings, Logger: &plog, Resident: s.Resident,
	})
	if err != nil {
		if pctx.Err() != nil {
			err = cmdutil.ErrInterrupted
		}
		s.failed.Add(1)
		log.Warn().Str("trace", req.Trace).Err(err).Msg("proof failed")
		wire.WriteLine(out, wire.Response{Error: err.Error(), ExitCode: int(cmdutil.ExitCodeFor(err))})
		return
	}
	s.proved.Add(1)
	log.Info().Str("trace", req.Trace).Str("proof", rep.Output).Str("elapsed", time.Since(start).Round(time.Millisecond).String()).Msg("proof written")
	report, err := json.Marshal(rep)
	if err == nil {
		err = wire.WriteLine(out, wire.Response{Report: report})
	}
	if err != nil {
		log.Warn().Err(err).Msg("the report could not be sent: the client hung up")
	}
}

// usage makes a request's error a UsageError unless it has a class already.
func usage(err error) error {
	if cmdutil.ExitCodeFor(err) == cmdutil.ExitError {
		return &cmdutil.UsageError{Err: err}
	}
	return err
}

// lockedWriter serialises the lines of one connection (log records come from the proof's
// goroutines).
type lockedWriter struct {
	mu sync.Mutex
	w  net.Conn
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// recordWriter sends each zerolog record (one JSON object a Write) as a Response's Log.
type recordWriter struct{ w *lockedWriter }

func (rw recordWriter) Write(p []byte) (int, error) {
	rec := p
	for len(rec) > 0 && (rec[len(rec)-1] == '\n' || rec[len(rec)-1] == '\r') {
		rec = rec[:len(rec)-1]
	}
	if err := wire.WriteLine(rw.w, wire.Response{Log: append([]byte(nil), rec...)}); err != nil {
		return 0, err
	}
	return len(p), nil
}
