package version

import (
	"encoding/json"
	"runtime"
	"testing"

	"github.com/metalprove/metalprove/internal/cmdutil"
	"github.com/metalprove/metalprove/internal/cmdutil/cmdtest"
)

func TestNewCmdVersion(t *testing.T) {
	tests := []struct {
		args     []string
		wantJSON bool
		wantErr  bool
	}{
		{args: []string{}, wantJSON: false},
		{args: []string{"--json"}, wantJSON: true},
		{args: []string{"extra"}, wantErr: true},
	}
	for _, tt := range tests {
		f := cmdtest.NewFactory("1.2.3")
		got, ok := cmdtest.Parse(t, f, NewCmdVersion, tt.args, tt.wantErr)
		if !ok {
			continue
		}
		if got.JSON != tt.wantJSON || got.Version != "1.2.3" {
			t.Errorf("%v: options %+v", tt.args, got)
		}
	}
}

func Test_versionRun(t *testing.T) {
	ios, _, out, _ := cmdutil.TestStreams()
	if err := versionRun(&Options{IO: ios, Version: "v0.1.0"}); err != nil {
		t.Fatal(err)
	}
	want := "metalprove v0.1.0\n" + runtime.Version() + " " + runtime.GOOS + "/" + runtime.GOARCH + "\n"
	if out.String() != want {
		t.Errorf("output %q, want %q", out.String(), want)
	}
}

func Test_versionRunJSON(t *testing.T) {
	ios, _, out, _ := cmdutil.TestStreams()
	if err := versionRun(&Options{IO: ios, Version: "v0.1.0", JSON: true}); err != nil {
		t.Fatal(err)
	}
	var info Info
	if err := json.Unmarshal(out.Bytes(), &info); err != nil {
		t.Fatalf("output %q: %v", out.String(), err)
	}
	if want := current("v0.1.0"); info != want {
		t.Errorf("got %+v, want %+v", info, want)
	}
}
