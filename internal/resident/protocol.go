package resident

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/metalprove/metalprove/internal/prover"
)

// Version is the protocol's version: a server answers a request of another version with an
// error naming both.
const Version = 1

// maxLine bounds one line of the protocol (a request is a few hundred bytes; a report a few
// kilobytes).
const maxLine = 1 << 20

// Request asks the resident prover for one proof: prove's flags, with the paths absolute.
type Request struct {
	Version int    `json:"version"`
	Trace   string `json:"trace"`
	Output  string `json:"output"`
	Key     string `json:"key,omitempty"`
	Airs    string `json:"airs,omitempty"`
	// Params are the parameters the client resolved (absent with Key).
	Params        *prover.Resolved `json:"params,omitempty"`
	AllowInsecure bool             `json:"allow_insecure,omitempty"`
	NoCheck       bool             `json:"no_check,omitempty"`
	// LogLevel is the level of the log records sent back (zerolog's names; "" for none).
	LogLevel string `json:"log_level,omitempty"`
}

// Response is one line of the server's answer: a log record, or the last line, with the
// report or the error.
type Response struct {
	Log    json.RawMessage     `json:"log,omitempty"`
	Report *prover.ProveReport `json:"report,omitempty"`
	Error  string              `json:"error,omitempty"`
	// ExitCode is the exit status the error maps to (cmdutil.ExitCodeFor).
	ExitCode int `json:"exit_code,omitempty"`
}

// ErrProtocol: a line that is not the protocol's (too long, not JSON, unknown fields, a
// connection closed before the last line).
var ErrProtocol = errors.New("resident: protocol")

// readLine reads one line (without its newline) of at most maxLine bytes.
func readLine(r *bufio.Reader) ([]byte, error) {
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
		if len(line) > maxLine {
			return nil, fmt.Errorf("%w: a line of more than %d bytes", ErrProtocol, maxLine)
		}
		if !isPrefix {
			return line, nil
		}
	}
}

// decode decodes one line strictly (unknown fields are errors).
func decode(line []byte, v any) error {
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

// writeLine writes v as one line.
func writeLine(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}
