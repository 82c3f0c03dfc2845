package farm

import (
	"strings"
	"testing"
	"time"
)

func validJob() *Job {
	d := strings.Repeat("ab", 32)
	return &Job{Version: JobVersion, ID: "0123456789abcdef0123", Key: Object{Name: KeyObjectPrefix + d, SHA256: d, Bytes: 10},
		Trace: Object{Name: TraceObjectPrefix + "0123456789abcdef0123", SHA256: d, Bytes: 20}, TraceName: "k.trace", SubmittedAt: time.Unix(1, 0).UTC()}
}

func TestJobRecordRoundTripAndChecks(t *testing.T) {
	b, err := validJob().Encode()
	if err != nil {
		t.Fatal(err)
	}
	got, err := DecodeJob(b)
	if err != nil {
		t.Fatal(err)
	}
	if *got != *validJob() {
		t.Errorf("decoded %+v, want %+v", got, validJob())
	}
	for _, c := range []struct {
		name   string
		change func(j *Job)
		want   string
	}{
		{"newer version", func(j *Job) { j.Version = 2 }, "job record version 2: this metalprove reads version 1"},
		{"no version", func(j *Job) { j.Version = 0 }, "job record version 0"},
		{"bad id", func(j *Job) { j.ID = "../x" }, `job id "../x"`},
		{"key object not its digest", func(j *Job) { j.Key.Name = KeyObjectPrefix + "other" }, "key object"},
		{"key digest not hex", func(j *Job) { j.Key.SHA256 = "xyz"; j.Key.Name = KeyObjectPrefix + "xyz" }, "not a SHA-256"},
		{"trace object of another job", func(j *Job) { j.Trace.Name = TraceObjectPrefix + "other" }, "trace object"},
		{"trace name a path", func(j *Job) { j.TraceName = "../../etc/cron.d/x" }, "is not a file name"},
		{"no trace name", func(j *Job) { j.TraceName = "" }, "is not a file name"},
		{"trace digest upper case", func(j *Job) { j.Trace.SHA256 = strings.ToUpper(j.Trace.SHA256) }, "lower-case"},
	} {
		j := validJob()
		c.change(j)
		b, _ := j.Encode()
		if _, err := DecodeJob(b); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error naming %q", c.name, err, c.want)
		}
	}
	if _, err := DecodeJob([]byte("[1,2]")); err == nil || !strings.Contains(err.Error(), "not JSON of a job") {
		t.Errorf("array: %v", err)
	}
	if _, err := DecodeJob(make([]byte, MaxRecordBytes+1)); err == nil || !strings.Contains(err.Error(), "the limit is") {
		t.Errorf("oversized record: %v", err)
	}
}

func TestStatusRecordVersion(t *testing.T) {
	if _, err := decodeStatus("j1", []byte(`{"version":9,"id":"j1","state":"done"}`)); err == nil || !strings.Contains(err.Error(), "version 9") {
		t.Errorf("newer status: %v", err)
	}
	st, err := decodeStatus("j1", []byte(`{"version":1,"id":"j1","state":"failed","error":"x"}`))
	if err != nil || !st.Ended() || st.Error != "x" {
		t.Errorf("status %+v, %v", st, err)
	}
}

func TestJobIDsAndNames(t *testing.T) {
	seen := map[string]bool{}
	for range 100 {
		id := NewJobID()
		if err := CheckJobID(id); err != nil || len(id) != 20 || seen[id] {
			t.Fatalf("NewJobID %q: %v (or repeated)", id, err)
		}
		seen[id] = true
	}
	for _, bad := range []string{"", "a/b", "a.b", "a b", strings.Repeat("a", 65)} {
		if CheckJobID(bad) == nil {
			t.Errorf("CheckJobID(%q) accepted it", bad)
		}
	}
	for in, want := range map[string]string{"dir/k16.trace": "k16.trace", "k.trace": "k.trace", "..": "trace", "/": "trace", "": "trace"} {
		if got := TraceFileName(in); got != want {
			t.Errorf("TraceFileName(%q) = %q, want %q", in, got, want)
		}
	}
	for in, want := range map[string]string{
		"nats://127.0.0.1:4222":              "nats://127.0.0.1:4222",
		"nats://u:pw@h1:4222,nats://h2:4222": "nats://u:xxxxx@h1:4222,nats://h2:4222",
		"nats://token@h:4222":                "nats://xxxxx@h:4222",
		"tls://a:b@h:4222":                   "tls://a:xxxxx@h:4222",
	} {
		if got := RedactURL(in); got != want {
			t.Errorf("RedactURL(%q) = %q, want %q", in, got, want)
		}
	}
}
