package progress

import (
	"bytes"
	"fmt"
	"strings"
	"sync"
	"testing"
)

// syncBuffer is a bytes.Buffer safe for the redraw goroutine.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestOffDrawsNothing(t *testing.T) {
	var buf syncBuffer
	d := New(&buf, false)
	task := d.Start("proving", 6, "stages")
	task.Step("commit")
	task.Add(1)
	task.Done()
	fmt.Fprintln(d.Writer(), "a log line")
	if got := buf.String(); got != "a log line\n" {
		t.Errorf("display off wrote %q, want only the log line", got)
	}
	var nilDisplay *Display
	nilDisplay.Start("x", 0, "").Done()
}

func TestOnDrawsAndKeepsLogLinesWhole(t *testing.T) {
	var buf syncBuffer
	d := New(&buf, true)
	task := d.Start("proving", 6, "stages")
	task.Step("commit")
	fmt.Fprintln(d.Writer(), "INF stage started stage=commit")
	task.Add(1)
	task.Done()
	out := buf.String()
	for _, want := range []string{"proving", "commit", "INF stage started stage=commit\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("output %q lacks %q", out, want)
		}
	}
	// The log line starts on a cleared line: what precedes it ends with a carriage return.
	i := strings.Index(out, "INF stage")
	if i > 0 && out[i-1] != '\r' {
		t.Errorf("log line not preceded by a cleared line: %q", out[:i])
	}
	spin := d.Start("generating", 0, "")
	spin.Step("keccakf")
	spin.Done()
	if !strings.Contains(buf.String(), "generating: keccakf") {
		t.Errorf("spinner line missing: %q", buf.String())
	}
}

// A proof's stages differ in cost by orders of magnitude: their task counts stages in words and
// never shows a percentage; Clear ends the line before a last message.
func TestStagesShowNoPercentage(t *testing.T) {
	var buf syncBuffer
	d := New(&buf, true)
	task := d.Start("prove k.trace", 6, Stages)
	task.Step("commit")
	task.Add(1)
	task.Step("gkr")
	d.Clear()
	task.Step("never drawn")
	out := buf.String()
	for _, want := range []string{"[stage 1/6]: commit", "[stage 2/6]: gkr"} {
		if !strings.Contains(out, want) {
			t.Errorf("output %q lacks %q", out, want)
		}
	}
	if strings.Contains(out, "%") || strings.Contains(out, "never drawn") {
		t.Errorf("output %q shows a percentage or a step after Clear", out)
	}
}
