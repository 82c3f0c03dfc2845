package wire

import (
	"bufio"
	"errors"
	"io"
	"strings"
	"testing"
)

// TestCheck: whole requests pass, each missing or conflicting part is named.
func TestCheck(t *testing.T) {
	ok := `{"version":1,"trace":"/a","output":"/b","params":{"preset":"test"}}`
	var r Request
	if err := Decode([]byte(ok), &r); err != nil || r.Check() != nil {
		t.Fatalf("a whole request: %v, %v", err, r.Check())
	}
	for _, tc := range []struct{ line, want string }{
		{"hello", "protocol"},
		{`{"version":1,"trace":"/a","output":"/b","params":{},"nope":1}`, "unknown field"},
		{`{"version":2,"trace":"/a","output":"/b","params":{}}`, "version 2"},
		{`{"version":1,"trace":"a.trace","output":"/b","key":"/k"}`, "absolute"},
		{`{"version":1,"trace":"/a","output":"b","key":"/k"}`, "absolute"},
		{`{"version":1,"trace":"/a","output":"/b","key":"k"}`, "absolute"},
		{`{"version":1,"trace":"/a","output":"/b"}`, "neither a key nor parameters"},
		{`{"version":1,"trace":"/a","output":"/b","params":null}`, "neither a key nor parameters"},
		{`{"version":1,"trace":"/a","output":"/b","key":"/k","params":{}}`, "a key and parameters"},
		{`{"version":1} {}`, "more than one"},
	} {
		var r Request
		err := Decode([]byte(tc.line), &r)
		if err == nil {
			err = r.Check()
		}
		if !errors.Is(err, ErrProtocol) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an ErrProtocol naming %q", tc.line, err, tc.want)
		}
	}
}

// TestReadLine: lines up to MaxLine bytes, longer ones refused, a cut line unexpected.
func TestReadLine(t *testing.T) {
	long := strings.Repeat("x", MaxLine)
	r := bufio.NewReaderSize(strings.NewReader("a\n"+long+"\n"+long+"y\nz"), 4096)
	for _, want := range []string{"a", long} {
		if got, err := ReadLine(r); err != nil || string(got) != want {
			t.Fatalf("line of %d bytes: %d bytes, %v", len(want), len(got), err)
		}
	}
	if _, err := ReadLine(r); !errors.Is(err, ErrProtocol) {
		t.Errorf("a line of MaxLine+1 bytes: %v", err)
	}
	r = bufio.NewReader(strings.NewReader(""))
	if _, err := ReadLine(r); err != io.EOF {
		t.Errorf("no line: %v, want io.EOF", err)
	}
}

// FuzzDecodeRequest: any line decodes or fails without a panic, and a decoded request is
// checked; the same for a response.
func FuzzDecodeRequest(f *testing.F) {
	f.Add([]byte(`{"version":1,"trace":"/a","output":"/b","params":{"params":{},"preset":"test"}}`))
	f.Add([]byte(`{"version":1,"trace":"/a","output":"/b","key":"/k","airs":"0,1"}`))
	f.Add([]byte(`{"report":{"trace":"/a"},"error":"","exit_code":3}`))
	f.Add([]byte(`{}`))
	f.Fuzz(func(t *testing.T, line []byte) {
		var r Request
		if Decode(line, &r) == nil {
			r.Check()
		}
		var resp Response
		Decode(line, &resp)
	})
}
