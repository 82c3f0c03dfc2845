// Package progress shows what a long command is doing on a terminal: one line on stderr, drawn
// with github.com/schollz/progressbar/v3, with a description, the current step and its elapsed
// time, and a bar where the amount of work is known (a spinner where it is not). A Display that
// is off (stderr not a terminal, --quiet, JSON logs) draws nothing at all; its methods are then
// no-ops, so commands call them unconditionally.
//
// Logs go to the same stderr: the logger writes through Display.Writer, which clears the line,
// writes the log record and draws the line again, so that log records and the progress line
// never mix.
package progress

import (
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/schollz/progressbar/v3"
)

// redrawEvery is how often the line is redrawn while a task runs (the elapsed times tick).
const redrawEvery = 200 * time.Millisecond

// Display owns the progress line of one command.
type Display struct {
	mu   sync.Mutex
	w    io.Writer
	on   bool
	task *Task
}

// New returns a display writing to w (stderr); on is false when nothing must be drawn.
func New(w io.Writer, on bool) *Display { return &Display{w: w, on: on} }

// Enabled reports whether the display draws anything.
func (d *Display) Enabled() bool { return d != nil && d.on }

// Writer returns the writer the logger uses: w itself when the display is off, else a writer
// that lifts the progress line out of the way of each record.
func (d *Display) Writer() io.Writer {
	if !d.Enabled() {
		if d == nil {
			return io.Discard
		}
		return d.w
	}
	return logWriter{d}
}

type logWriter struct{ d *Display }

func (lw logWriter) Write(p []byte) (int, error) {
	d := lw.d
	d.mu.Lock()
	defer d.mu.Unlock()
	if t := d.task; t != nil {
		t.bar.Clear()
	}
	n, err := d.w.Write(p)
	if t := d.task; t != nil {
		t.draw()
	}
	return n, err
}

// Task is one progress line: Start it, report steps and work done, then Done.
type Task struct {
	d     *Display
	bar   *progressbar.ProgressBar
	desc  string
	total int64
	done  int64
	step  string
	// stepStart is when the current step began.
	stepStart time.Time
	stop      chan struct{}
	ended     bool
	// stages: the line counts steps in words (Stages), the bar is a spinner.
	stages bool
}

// Stages is the unit of tasks whose steps are a proof's stages: they differ in cost by orders of
// magnitude (a minute of commit was "33 %"), so such a task shows "stage k/N" beside a spinner,
// never a bar or a percentage.
const Stages = "stages"

// Start begins a progress line described by desc. total is the amount of work (the bar's
// length, in units of unit, e.g. "columns", "proofs"), or ≤ 0 when unknown (a spinner); with unit
// Stages the count is shown without a bar. It ends any task still running. On a display that is
// off it returns a Task whose methods do nothing.
func (d *Display) Start(desc string, total int64, unit string) *Task {
	if !d.Enabled() {
		return nil
	}
	d.mu.Lock()
	if d.task != nil {
		d.task.endLocked()
	}
	max := total
	if max <= 0 || unit == Stages {
		max = -1
	}
	opts := []progressbar.Option{
		progressbar.OptionSetWriter(d.w),
		progressbar.OptionSetWidth(24),
		progressbar.OptionSetElapsedTime(true),
		progressbar.OptionSetPredictTime(false),
		progressbar.OptionClearOnFinish(),
		progressbar.OptionSetSpinnerChangeInterval(0), // Task.run redraws
		progressbar.OptionSpinnerType(14),
	}
	if max > 0 {
		opts = append(opts, progressbar.OptionShowCount(), progressbar.OptionSetItsString(unit))
	}
	t := &Task{d: d, bar: progressbar.NewOptions64(max, opts...), desc: desc, total: total, stepStart: time.Now(), stop: make(chan struct{}),
		stages: unit == Stages && total > 0}
	d.task = t
	t.draw()
	d.mu.Unlock()
	go t.run()
	return t
}

// run redraws the line until the task ends.
func (t *Task) run() {
	tick := time.NewTicker(redrawEvery)
	defer tick.Stop()
	for {
		select {
		case <-t.stop:
			return
		case <-tick.C:
			t.d.mu.Lock()
			if !t.ended {
				t.draw()
			}
			t.d.mu.Unlock()
		}
	}
}

// draw renders the line (d.mu held).
func (t *Task) draw() {
	desc := t.desc
	if t.stages {
		desc += fmt.Sprintf(" [stage %d/%d]", min(t.done+1, t.total), t.total)
	}
	if t.step != "" {
		desc += ": " + t.step + " " + fmtElapsed(time.Since(t.stepStart))
	}
	t.bar.Describe(desc) // renders
}

func fmtElapsed(d time.Duration) string {
	if d < time.Minute {
		return fmt.Sprintf("%.1fs", d.Seconds())
	}
	return d.Round(time.Second).String()
}

// Step names the step now running (a proving stage, a run); its elapsed time is shown beside it.
func (t *Task) Step(name string) {
	if t == nil {
		return
	}
	t.d.mu.Lock()
	defer t.d.mu.Unlock()
	if t.ended {
		return
	}
	t.step, t.stepStart = name, time.Now()
	t.draw()
}

// Add records n more units of work done.
func (t *Task) Add(n int64) {
	if t == nil || n == 0 {
		return
	}
	t.d.mu.Lock()
	defer t.d.mu.Unlock()
	if t.ended || t.total <= 0 {
		return
	}
	n = min(n, t.total-t.done)
	if n <= 0 {
		return
	}
	t.done += n
	if t.stages {
		t.draw()
		return
	}
	if t.done >= t.total {
		// A full bar finishes (and clears) itself: keep it until Done.
		t.done = t.total - 1
		n--
		if n == 0 {
			return
		}
	}
	t.bar.Add64(n)
	t.draw()
}

// Clear ends the running task, if any, and clears its line: before a last message (an
// interrupt, an error) is written to the terminal, so that it does not land on the bar.
func (d *Display) Clear() {
	if !d.Enabled() {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.task != nil {
		d.task.endLocked()
	}
}

// Done ends the task and clears its line.
func (t *Task) Done() {
	if t == nil {
		return
	}
	t.d.mu.Lock()
	defer t.d.mu.Unlock()
	t.endLocked()
}

func (t *Task) endLocked() {
	if t.ended {
		return
	}
	t.ended = true
	close(t.stop)
	t.bar.Clear()
	t.bar.Exit()
	if t.d.task == t {
		t.d.task = nil
	}
}
