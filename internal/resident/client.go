package resident

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"time"

	"github.com/rs/zerolog"

	"github.com/metalprove/metalprove/internal/cmdutil"
	"github.com/metalprove/metalprove/internal/progress"
	"github.com/metalprove/metalprove/internal/prover"
	"github.com/metalprove/metalprove/internal/resident/wire"
	"github.com/metalprove/metalprove/internal/sysinfo"
)

// Prove hands req (prove's flags: Trace, Output, Key, Airs, Preset, AllowInsecure, NoCheck, with
// Settings, Logger and Progress) to the resident prover listening at socket and returns its
// report, the proof file written by it: the paths made absolute here, the parameters resolved
// here (the client's preset and config file, as a local prove), the resident's log records
// relayed to req.Logger and its stages shown on req.Progress. The report's process times are
// this process's (ProcessTimes: QueueMS, ServiceMS, SocketPath). Errors carry the exit status
// the resident gave; no resident at socket is a DeviceError; a cancelled ctx hangs up, which
// cancels the proof (no file), and returns cmdutil.ErrInterrupted.
func Prove(ctx context.Context, socket string, req prover.ProveRequest) (*prover.ProveReport, error) {
	began := time.Now()
	procStart, procKnown := sysinfo.ProcessStart()
	if ctx == nil {
		ctx = context.Background()
	}
	log := req.Logger
	if log == nil {
		n := zerolog.Nop()
		log = &n
	}
	r := wire.Request{Version: wire.Version, Airs: req.Airs, AllowInsecure: req.AllowInsecure, NoCheck: req.NoCheck}
	output := req.Output
	if output == "" {
		output = prover.DefaultProofOutput(req.Trace)
	}
	var err error
	for _, p := range []struct {
		flag string
		in   string
		out  *string
	}{{"--trace", req.Trace, &r.Trace}, {"-o", output, &r.Output}, {"--key", req.Key, &r.Key}} {
		if p.in == "" {
			continue
		}
		if *p.out, err = filepath.Abs(p.in); err != nil {
			return nil, cmdutil.Usagef("%s %s: %v", p.flag, p.in, err)
		}
	}
	if req.Key == "" {
		res, err := prover.ResolveParams(req.Preset, req.Settings, "", req.AllowInsecure)
		if err != nil {
			return nil, err
		}
		if r.Params, err = json.Marshal(res); err != nil {
			return nil, err
		}
	}
	// The resident's records at the client's level; at info at least while a progress line
	// shows the stages (only those at the client's level are relayed).
	want := log.GetLevel()
	sendLevel := want
	if req.Progress.Enabled() {
		sendLevel = min(sendLevel, zerolog.InfoLevel)
	}
	if sendLevel < zerolog.Disabled {
		r.LogLevel = sendLevel.String()
	}

	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", socket)
	if err != nil {
		if ctx.Err() != nil {
			return nil, cmdutil.ErrInterrupted
		}
		return nil, &cmdutil.DeviceError{Err: fmt.Errorf("--socket %s: no resident prover answers there (%v); start one with 'metalprove serve --socket %s'", socket, cmdutil.UnwrapPath(err), socket)}
	}
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	task := req.Progress.Start("prove "+req.Trace+" on the resident prover", 0, progress.Stages)
	defer task.Done()
	task.Step("sending the request")
	sent := time.Now()
	if err := wire.WriteLine(conn, r); err != nil {
		if ctx.Err() != nil {
			return nil, cmdutil.ErrInterrupted
		}
		return nil, fmt.Errorf("--socket %s: sending the request: %w", socket, err)
	}
	task.Step("waiting for the resident prover")
	br := bufio.NewReaderSize(conn, 64<<10)
	for {
		line, err := wire.ReadLine(br)
		if err != nil {
			if ctx.Err() != nil {
				return nil, cmdutil.ErrInterrupted
			}
			return nil, fmt.Errorf("--socket %s: the resident prover hung up before its answer: %w", socket, err)
		}
		var resp wire.Response
		if err := wire.Decode(line, &resp); err != nil {
			return nil, fmt.Errorf("--socket %s: %w", socket, err)
		}
		switch {
		case resp.Log != nil:
			relay(log, want, task, resp.Log)
		case resp.Error != "":
			return nil, errorOf(resp)
		case resp.Report != nil:
			done := time.Now()
			rep := new(prover.ProveReport)
			if err := json.Unmarshal(resp.Report, rep); err != nil {
				return nil, fmt.Errorf("--socket %s: %w: the report: %v", socket, wire.ErrProtocol, err)
			}
			pt := &rep.Process
			server := pt.SetupMS + pt.ReadMS + pt.WaitMS + pt.ProveMS
			pt.SetupMS += ms(sent.Sub(began))
			pt.ServiceMS = max(ms(done.Sub(sent))-server, 0)
			pt.CloseMS = 0
			pt.SocketPath = socket
			pt.StartMS, pt.TotalMS = 0, 0
			if procKnown {
				pt.StartMS = ms(began.Sub(procStart))
				pt.TotalMS = ms(done.Sub(procStart))
			}
			return rep, nil
		default:
			return nil, fmt.Errorf("--socket %s: %w: an empty answer", socket, wire.ErrProtocol)
		}
	}
}

// relay logs a resident's record on log when it is at least want, and shows its stage starts on
// task.
func relay(log *zerolog.Logger, want zerolog.Level, task *progress.Task, rec json.RawMessage) {
	var m map[string]any
	if json.Unmarshal(rec, &m) != nil {
		return
	}
	msg, _ := m[zerolog.MessageFieldName].(string)
	lvlName, _ := m[zerolog.LevelFieldName].(string)
	if stage, ok := m["stage"].(string); ok && msg == "stage started" {
		task.Step(stage)
	}
	lvl, err := zerolog.ParseLevel(lvlName)
	if err != nil || lvl < want {
		return
	}
	delete(m, zerolog.MessageFieldName)
	delete(m, zerolog.LevelFieldName)
	delete(m, zerolog.TimestampFieldName)
	log.WithLevel(lvl).Fields(m).Msg(msg)
}

// errorOf is the error of a resident's answer, of the class its exit status names.
func errorOf(resp wire.Response) error {
	err := errors.New(resp.Error)
	switch cmdutil.ExitCode(resp.ExitCode) {
	case cmdutil.ExitUsage:
		return &cmdutil.UsageError{Err: err}
	case cmdutil.ExitBadInput:
		return &cmdutil.BadInputError{Err: err}
	case cmdutil.ExitCheckFailed:
		return &cmdutil.CheckFailedError{Err: err}
	case cmdutil.ExitDevice:
		return &cmdutil.DeviceError{Err: err}
	case cmdutil.ExitInterrupted: // the resident was stopped, not this process
		return fmt.Errorf("the resident prover stopped before the proof was done (%s); no output written", resp.Error)
	}
	return err
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1e3 }
