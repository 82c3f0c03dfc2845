// Package wire is the resident prover's protocol on its Unix socket (version 1): one JSON object
// a line; the client sends a Request, the server answers with Responses (log records, then the
// report or the error with its exit status). It owns the lines' size limit, their strict
// decoding and the request's checks, and depends on nothing of the prover, so that its decoders
// are fuzzed without building the prover (internal/resident holds both ends).
package wire

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
)

// Version is the protocol's version: a server answers a request of another version with an
// error naming both.
const Version = 1

// MaxLine bounds one line of the protocol (a request is a few hundred bytes; a report a few
// kilobytes).
const MaxLine = 1 << 20

// Request asks the resident prover for one proof: prove's flags, with the paths absolute.
type Request struct {
	Version int    `json:"version"`
	Trace   string `json:"trace"`
	Output  string `json:"output"`
	Key     string `json:"key,omitempty"`
	Airs    string `json:"airs,omitempty"`
	// Params are the parameters the client resolved (prover.Resolved; absent with Key).
	Params        json.RawMessage `json:"params,omitempty"`
	AllowInsecure bool            `json:"allow_insecure,omitempty"`
	NoCheck       bool            `json:"no_check,omitempty"`
	// LogLevel is the level of the log records sent back (zerolog's names; "" for none).
	LogLevel string `json:"log_level,omitempty"`
}

// Response is one line of the server's answer: a log record, or the last line, with the report
// (prover.ProveReport) or the error.
type Response struct {
	Log    json.RawMessage `json:"log,omitempty"`
	Report json.RawMessage `json:"report,omitempty"`
	Error  string          `json:"error,omitempty"`
	// ExitCode is the exit status the error maps to (cmdutil.ExitCodeFor).
	ExitCode int `json:"exit_code,omitempty"`
}

// ErrProtocol: a line that is not the protocol's (too long, not JSON, unknown fields, a request
// that is not whole).
var ErrProtocol = errors.New("resident: protocol")

// ReadLine reads one line (without its newline) of at most MaxLine bytes; io.EOF when the
// connection ended before any byte of it.
func ReadLine(r *bufio.Reader) ([]byte, error) {
	var line []byte
	for {
		part, isPrefix, err := r.ReadLine()
		if err != nil {
			if err == io.EOF && len(line) > 0 {
				err = io.ErrUnexpectedEOF
			}
			return nil, err
		}
		line = append(line, part...)
		if len(line) > MaxLine {
			return nil, fmt.Errorf("%w: a line of more than %d bytes", ErrProtocol, MaxLine)
		}
		if !isPrefix {
			return line, nil
		}
	}
}

// Decode decodes one line strictly (unknown fields are errors, one object a line).
func Decode(line []byte, v any) error {
	d := json.NewDecoder(bytes.NewReader(line))
	d.DisallowUnknownFields()
	if err := d.Decode(v); err != nil {
		return fmt.Errorf("%w: %v", ErrProtocol, err)
	}
	if d.More() {
		return fmt.Errorf("%w: more than one object on a line", ErrProtocol)
	}
	return nil
}

// WriteLine writes v as one line.
func WriteLine(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}

// Check refuses requests that are not whole: the version, the trace and output as absolute
// paths, a key or parameters (not both).
func (r *Request) Check() error {
	params := len(r.Params) > 0 && string(r.Params) != "null"
	switch {
	case r.Version != Version:
		return fmt.Errorf("%w: request of version %d, this server speaks version %d", ErrProtocol, r.Version, Version)
	case r.Trace == "" || !filepath.IsAbs(r.Trace):
		return fmt.Errorf("%w: the trace %q is not an absolute path", ErrProtocol, r.Trace)
	case r.Output == "" || !filepath.IsAbs(r.Output):
		return fmt.Errorf("%w: the output %q is not an absolute path", ErrProtocol, r.Output)
	case r.Key != "" && !filepath.IsAbs(r.Key):
		return fmt.Errorf("%w: the key %q is not an absolute path", ErrProtocol, r.Key)
	case r.Key != "" && params:
		return fmt.Errorf("%w: a key and parameters: the parameters are the key's", ErrProtocol)
	case r.Key == "" && !params:
		return fmt.Errorf("%w: neither a key nor parameters", ErrProtocol)
	}
	return nil
}
