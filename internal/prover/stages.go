package prover

import (
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/metalprove/metalprove/internal/progress"
	"github.com/metalprove/metalprove/internal/stark"
)

// AirRow is one AIR of a proof, as reported (prove --json, bench --json).
type AirRow struct {
	Name   string `json:"name"`
	Width  int    `json:"width"`
	Height int    `json:"height"`
}

// StageRow is one proving stage of the report: wall time and the stage's counters.
type StageRow struct {
	Stage  string  `json:"stage"`
	WallMS float64 `json:"wall_ms"`
	StageCounters
	// Parts break the stage down (openings: stacking, whir).
	Parts []StageRow `json:"parts,omitempty"`
}

// StageCounters are a stage's device counters as reported (prove --json; bench --json gives
// their medians over the runs): kernel dispatches, host syncs, the host's wait in them, the
// device queue's gaps waiting on the host (stark.Counters), host↔device bytes, peak device
// memory during the stage.
type StageCounters struct {
	Dispatches      int     `json:"dispatches"`
	Syncs           int     `json:"syncs"`
	SyncWaitMS      float64 `json:"sync_wait_ms"`
	HostGapMS       float64 `json:"host_gap_ms"`
	BytesToDevice   int64   `json:"bytes_to_device"`
	BytesFromDevice int64   `json:"bytes_from_device"`
	PeakMemory      int64   `json:"peak_memory_bytes"`
}

// NewStageRow is the row of a stage's report, its parts included.
func NewStageRow(r stark.StageReport) StageRow {
	row := StageRow{Stage: r.Stage, WallMS: ms(r.Wall), StageCounters: StageCounters{Dispatches: r.Dispatches, Syncs: r.Syncs,
		SyncWaitMS: ms(r.SyncWait), HostGapMS: ms(r.HostGap), BytesToDevice: r.BytesToDevice, BytesFromDevice: r.BytesFromDevice,
		PeakMemory: r.MemoryPeak}}
	for _, p := range r.Parts {
		row.Parts = append(row.Parts, NewStageRow(p))
	}
	return row
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// StageWatch reports the stages of proofs as they run: a log record at info level when each
// starts and ends, the stage on the progress line, and, when heartbeat is set (no progress line),
// a record every HeartbeatEvery while a stage runs, so that the log never stays silent for long.
type StageWatch struct {
	log       *zerolog.Logger
	task      *progress.Task
	heartbeat bool
	// Prefix is added to the stage names shown and logged ("run 2/5").
	Prefix string
	// Level is the level of the stage start and done records (info by default; the heartbeat
	// of a long stage is always at info).
	Level zerolog.Level

	mu    sync.Mutex
	stage string
	start time.Time
	// last is when the running stage was last logged.
	last time.Time
	stop chan struct{}
}

// HeartbeatEvery is the interval of "still running" records of a long stage.
const HeartbeatEvery = 5 * time.Second

// NewStageWatch returns a watch logging to log and drawing on task (either may be nil).
func NewStageWatch(log *zerolog.Logger, task *progress.Task, heartbeat bool) *StageWatch {
	if log == nil {
		l := zerolog.Nop()
		log = &l
	}
	w := &StageWatch{log: log, task: task, heartbeat: heartbeat, Level: zerolog.InfoLevel}
	if heartbeat {
		w.stop = make(chan struct{})
		go w.beat(w.stop)
	}
	return w
}

// beat logs the heartbeat until stop closes (passed in: Close sets w.stop to nil under the lock).
func (w *StageWatch) beat(stop <-chan struct{}) {
	t := time.NewTicker(HeartbeatEvery / 5)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case now := <-t.C:
			w.mu.Lock()
			if w.stage != "" && now.Sub(w.last) >= HeartbeatEvery {
				w.last = now
				ev := w.log.Info().Str("stage", w.stage).Str("elapsed", now.Sub(w.start).Round(time.Second).String())
				if w.Prefix != "" {
					ev = ev.Str("run", w.Prefix)
				}
				ev.Msg("stage still running")
			}
			w.mu.Unlock()
		}
	}
}

// Start is ProveOptions.OnStageStart.
func (w *StageWatch) Start(stage string) {
	w.mu.Lock()
	w.stage, w.start = stage, time.Now()
	w.last = w.start
	w.mu.Unlock()
	ev := w.log.WithLevel(w.Level).Str("stage", stage)
	if w.Prefix != "" {
		ev = ev.Str("run", w.Prefix)
	}
	ev.Msg("stage started")
	name := stage
	if w.Prefix != "" {
		name = w.Prefix + " " + stage
	}
	w.task.Step(name)
}

// Done is ProveOptions.OnStage.
func (w *StageWatch) Done(r stark.StageReport) {
	w.mu.Lock()
	w.stage = ""
	w.mu.Unlock()
	ev := w.log.WithLevel(w.Level).Str("stage", r.Stage).Str("elapsed", r.Wall.Round(time.Microsecond).String())
	if w.Prefix != "" {
		ev = ev.Str("run", w.Prefix)
	}
	ev.Msg("stage done")
	w.task.Add(1)
}

// Close stops the heartbeat; it may be called more than once.
func (w *StageWatch) Close() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.stage = ""
	if w.stop != nil {
		close(w.stop)
		w.stop = nil
	}
}
