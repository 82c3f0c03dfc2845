package farm

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"
)

// The versions of the records this metalprove writes and reads. A record of another version is
// refused by name (a newer metalprove's job is terminated with that reason, not misread).
const (
	JobVersion    = 1
	StatusVersion = 1
)

// Object names a payload in BlobBucket: its object name, SHA-256 (hex) and size.
type Object struct {
	Name   string `json:"name"`
	SHA256 string `json:"sha256"`
	Bytes  int64  `json:"bytes"`
}

// Job is the record of one proof to make: the message a worker pulls from JobStream.
type Job struct {
	Version int    `json:"version"`
	ID      string `json:"id"`
	// Key is the proving-key file (KeyObjectPrefix + its SHA-256), Trace the trace file
	// (TraceObjectPrefix + ID).
	Key   Object `json:"key"`
	Trace Object `json:"trace"`
	// TraceName is the trace file's base name as submitted (messages name the trace by it).
	TraceName string `json:"trace_name"`
	// Airs are the key's AIRs the trace proves ("0,2,5"; "": all), as prove --airs.
	Airs string `json:"airs,omitempty"`
	// AllowInsecure accepts a key whose parameters have a security target below 100 bits.
	AllowInsecure bool      `json:"allow_insecure,omitempty"`
	SubmittedAt   time.Time `json:"submitted_at"`
}

// State is where a job stands.
type State string

const (
	// StateQueued: submitted (or released by a draining worker), waiting for a worker.
	StateQueued State = "queued"
	// StateProving: a worker took it up (Status.Worker, Status.Attempts).
	StateProving State = "proving"
	// StateDone: the proof is stored (Status.Proof) and the job acknowledged.
	StateDone State = "done"
	// StateFailed: terminated; Status.Error says why. It is not retried.
	StateFailed State = "failed"
)

// Status is what is known of a job: the record in StatusBucket under its id.
type Status struct {
	Version   int    `json:"version"`
	ID        string `json:"id"`
	State     State  `json:"state"`
	TraceName string `json:"trace_name"`
	KeySHA256 string `json:"key_sha256"`
	// Attempts counts the deliveries a worker took up; Worker names the last such worker.
	Attempts int    `json:"attempts"`
	Worker   string `json:"worker,omitempty"`
	// Proof is the stored proof (done), ProveMS the time the proof took on its worker.
	Proof   *Object `json:"proof,omitempty"`
	ProveMS float64 `json:"prove_ms,omitempty"`
	// Error says why the job failed (failed), or what went wrong with the last attempt of a job
	// that is retried; ExitCode is the exit status `metalprove prove` gives for that error.
	Error       string    `json:"error,omitempty"`
	ExitCode    int       `json:"exit_code,omitempty"`
	SubmittedAt time.Time `json:"submitted_at"`
	UpdatedAt   time.Time `json:"updated_at"`
}

// Ended reports whether the job will not change any more (done or failed).
func (s *Status) Ended() bool { return s.State == StateDone || s.State == StateFailed }

// NewJobID returns a new job id: 20 random hex digits, usable as a key, an object name and a
// file name.
func NewJobID() string {
	var b [10]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(fmt.Sprintf("farm: reading random bytes: %v", err)) // crypto/rand does not fail on Linux or macOS
	}
	return hex.EncodeToString(b[:])
}

// CheckJobID rejects what cannot be a job id: one to 64 characters of [0-9a-zA-Z_-] (a status
// key, an object name and a file name at once).
func CheckJobID(id string) error {
	if id == "" || len(id) > 64 {
		return fmt.Errorf("job id %q: want 1 to 64 characters", id)
	}
	for _, c := range id {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || c == '-' || c == '_') {
			return fmt.Errorf("job id %q: only letters, digits, '-' and '_' are allowed", id)
		}
	}
	return nil
}

// TraceFileName is the base name a trace is known by in the farm: name's last element, or
// "trace" when that is no usable file name.
func TraceFileName(name string) string {
	base := filepath.Base(name)
	if base == "." || base == ".." || base == string(filepath.Separator) || strings.ContainsAny(base, "/\\\x00") {
		return "trace"
	}
	return base
}

// Encode is the job's record as published.
func (j *Job) Encode() ([]byte, error) { return json.Marshal(j) }

// DecodeJob decodes and checks a job record: its version, its id and its objects' names.
func DecodeJob(b []byte) (*Job, error) {
	if len(b) > MaxRecordBytes {
		return nil, fmt.Errorf("job record of %d bytes: the limit is %d", len(b), MaxRecordBytes)
	}
	var j Job
	if err := json.Unmarshal(b, &j); err != nil {
		return nil, fmt.Errorf("job record is not JSON of a job: %w", err)
	}
	if j.Version != JobVersion {
		return nil, fmt.Errorf("job record version %d: this metalprove reads version %d", j.Version, JobVersion)
	}
	if err := CheckJobID(j.ID); err != nil {
		return nil, fmt.Errorf("job record: %w", err)
	}
	if err := checkDigest(j.Key.SHA256); err != nil {
		return nil, fmt.Errorf("job %s: key: %w", j.ID, err)
	}
	if want := KeyObjectPrefix + j.Key.SHA256; j.Key.Name != want {
		return nil, fmt.Errorf("job %s: key object %q, want %q", j.ID, j.Key.Name, want)
	}
	if want := TraceObjectPrefix + j.ID; j.Trace.Name != want {
		return nil, fmt.Errorf("job %s: trace object %q, want %q", j.ID, j.Trace.Name, want)
	}
	if err := checkDigest(j.Trace.SHA256); err != nil {
		return nil, fmt.Errorf("job %s: trace: %w", j.ID, err)
	}
	if j.TraceName == "" || TraceFileName(j.TraceName) != j.TraceName {
		// A worker writes the trace under this name: a path would put it elsewhere.
		return nil, fmt.Errorf("job %s: trace name %q is not a file name", j.ID, j.TraceName)
	}
	return &j, nil
}

// checkDigest rejects what is not a SHA-256 in hex.
func checkDigest(d string) error {
	if b, err := hex.DecodeString(d); err != nil || len(b) != 32 || strings.ToLower(d) != d {
		return fmt.Errorf("digest %q is not a SHA-256 in lower-case hex", d)
	}
	return nil
}

// encodeStatus is the status's record.
func encodeStatus(s *Status) ([]byte, error) { return json.Marshal(s) }

// errStatusVersion marks a status record of another version.
var errStatusVersion = errors.New("status record version")

// decodeStatus decodes a status record of job id.
func decodeStatus(id string, b []byte) (*Status, error) {
	var s Status
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("status of job %s is not JSON of a status: %w", id, err)
	}
	if s.Version != StatusVersion {
		return nil, fmt.Errorf("job %s: %w %d: this metalprove reads version %d", id, errStatusVersion, s.Version, StatusVersion)
	}
	return &s, nil
}
