package params

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/metalprove/metalprove/internal/cmdutil"
	"github.com/metalprove/metalprove/internal/cmdutil/cmdtest"
)

func TestNewCmdParams(t *testing.T) {
	tests := []struct {
		args    []string
		want    Options
		wantErr bool
	}{
		{args: []string{}, want: Options{LogStackedHeight: 21}},
		{args: []string{"--preset", "leaf", "--json"}, want: Options{Preset: "leaf", LogStackedHeight: 21, JSON: true}},
		{args: []string{"--log-stacked-height", "24", "--allow-insecure"}, want: Options{LogStackedHeight: 24, LogStackedHeightSet: true, AllowInsecure: true}},
		{args: []string{"--log-stacked-height", "21"}, want: Options{LogStackedHeight: 21, LogStackedHeightSet: true}},
		{args: []string{"--log-stacked-height", "x"}, wantErr: true},
		{args: []string{"extra"}, wantErr: true},
	}
	for _, tt := range tests {
		f := cmdtest.NewFactory("test")
		f.Settings.ConfigFile = "c.yaml"
		got, ok := cmdtest.Parse(t, f, NewCmdParams, tt.args, tt.wantErr)
		if !ok {
			continue
		}
		tt.want.IO, tt.want.ConfigFile = f.IO, "c.yaml"
		if !reflect.DeepEqual(*got, tt.want) {
			t.Errorf("%v: got %+v, want %+v", tt.args, *got, tt.want)
		}
	}
}

func run(t *testing.T, opts Options) (string, error) {
	t.Helper()
	ios, _, out, _ := cmdutil.TestStreams()
	opts.IO = ios
	if opts.LogStackedHeight == 0 {
		opts.LogStackedHeight = 21
	}
	err := paramsRun(&opts)
	return out.String(), err
}

func TestParamsRunJSON(t *testing.T) {
	out, err := run(t, Options{JSON: true})
	if err != nil {
		t.Fatal(err)
	}
	var r struct {
		Source string `json:"source"`
		Params struct {
			Whir struct {
				Rounds []struct {
					NumQueries int `json:"num_queries"`
				} `json:"rounds"`
			} `json:"whir"`
		} `json:"params"`
		Derived struct {
			LogFinalPolyLen int `json:"log_final_poly_len"`
		} `json:"derived"`
		PostcardHex string `json:"postcard_hex"`
		WhirRounds  []struct {
			NumQueries      int `json:"num_queries"`
			RSDomainLogSize int `json:"rs_domain_log_size"`
		} `json:"whir_rounds"`
		Soundness struct {
			Bounds struct {
				Name string `json:"name"`
			} `json:"bounds"`
			TotalBits float64 `json:"total_bits"`
			Weakest   string  `json:"weakest"`
		} `json:"soundness"`
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	var nq []int
	for _, x := range r.Params.Whir.Rounds {
		nq = append(nq, x.NumQueries)
	}
	if len(nq) != 3 || nq[0] != 193 || nq[1] != 88 || nq[2] != 81 || r.WhirRounds[0].RSDomainLogSize != 22 ||
		r.Derived.LogFinalPolyLen != 9 || r.PostcardHex != "04118010010403c10158510f140500818080c007071203" ||
		r.Soundness.Bounds.Name != "App-VM bounds" || r.Soundness.TotalBits < 100.085 || r.Soundness.TotalBits > 100.095 {
		t.Fatalf("unexpected report: %+v\n%s", r, out)
	}
}

func TestParamsRunText(t *testing.T) {
	out, err := run(t, Options{Preset: "app-100bit"})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"preset app-100bit (log_stacked_height 21)", "[193 88 81]", "0.4150375", "App-VM bounds",
		"total", "100.09 (weakest: whir round 2 query⊕γ)", "102.72", "105.63", "100.10 (", "111.63"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	for _, preset := range []string{"leaf", "internal", "root", "hook"} {
		if _, err := run(t, Options{Preset: preset}); err != nil {
			t.Errorf("%s: %v", preset, err)
		}
	}
}

func usage(t *testing.T, err error, want string) {
	t.Helper()
	var u *cmdutil.UsageError
	if !errors.As(err, &u) || !strings.Contains(err.Error(), want) {
		t.Errorf("want UsageError containing %q, got %v", want, err)
	}
}

func TestParamsRunErrors(t *testing.T) {
	_, err := run(t, Options{Preset: "test"})
	usage(t, err, "security_bits 5 is below 100")
	out, err := run(t, Options{Preset: "test", AllowInsecure: true})
	if err != nil || !strings.Contains(out, "INSECURE") || !strings.Contains(out, "[10 4 2]") {
		t.Errorf("test preset with --allow-insecure: %v\n%s", err, out)
	}
	_, err = run(t, Options{Preset: "bogus"})
	usage(t, err, `preset "bogus"`)
	_, err = run(t, Options{LogStackedHeight: 25, LogStackedHeightSet: true})
	usage(t, err, "log_stacked_height 25")
	_, err = run(t, Options{Preset: "leaf", LogStackedHeight: 22, LogStackedHeightSet: true})
	usage(t, err, "--log-stacked-height applies to --preset app-100bit only")
}

func TestParamsRunConfig(t *testing.T) {
	// The config file's params section is used when no --preset is given.
	out, err := run(t, Options{ConfigFile: "../../../configs/test.yaml", AllowInsecure: true})
	if err != nil || !strings.Contains(out, "params section of ../../../configs/test.yaml") || !strings.Contains(out, "[10 4 2]") {
		t.Errorf("%v\n%s", err, out)
	}
	_, err = run(t, Options{ConfigFile: "../../../configs/test.yaml"})
	usage(t, err, "allow_insecure")
	out, err = run(t, Options{ConfigFile: "../../../configs/app-100bit.yaml"})
	if err != nil || !strings.Contains(out, "[193 88 81]") {
		t.Errorf("%v\n%s", err, out)
	}
	dir := t.TempDir()
	noParams := filepath.Join(dir, "a.yaml")
	os.WriteFile(noParams, []byte("log_level: info\n"), 0o600)
	out, err = run(t, Options{ConfigFile: noParams})
	if err != nil || !strings.Contains(out, "preset app-100bit") {
		t.Errorf("no params section: %v\n%s", err, out)
	}
	bad := filepath.Join(dir, "b.yaml")
	os.WriteFile(bad, []byte("params:\n  security_bits: 100\n  l_skip: -1\n"), 0o600)
	_, err = run(t, Options{ConfigFile: bad})
	usage(t, err, "params.l_skip must be ≥ 0")
	// An explicit --preset wins over the params section.
	out, err = run(t, Options{ConfigFile: "../../../configs/test.yaml", Preset: "leaf"})
	if err != nil || !strings.Contains(out, "[118 84 81]") {
		t.Errorf("%v\n%s", err, out)
	}
}
