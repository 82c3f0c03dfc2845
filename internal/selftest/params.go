package selftest

import (
	"bytes"
	"fmt"
	"math"
	"slices"

	"github.com/metalprove/metalprove/internal/params"
)

func paramsChecks() []Check {
	return []Check{
		{Name: "params/preset-whir-rounds", Run: checkPresetRounds},
		{Name: "params/app21-soundness", Run: checkApp21Soundness},
		{Name: "params/app21-postcard", Run: checkApp21Postcard},
	}
}

// checkPresetRounds: every preset reproduces the WHIR query counts, final length and LogUp PoW
// of spec protocol-a §4.4.
func checkPresetRounds() error {
	for _, c := range []struct {
		name               string
		h                  int
		rounds             []int
		logFinal, logupPow int
	}{
		{"app-100bit", 21, []int{193, 88, 81}, 9, 18},
		{"app-100bit", 24, []int{193, 88, 81, 81}, 8, 18},
		{"leaf", 0, []int{118, 84, 81}, 9, 18},
		{"internal", 0, []int{68, 30, 20}, 7, 19},
		{"root", 0, []int{61, 30, 20}, 8, 18},
		{"hook", 0, []int{193, 42, 24}, 8, 18},
	} {
		p, _, err := params.Preset(c.name, c.h)
		if err != nil {
			return err
		}
		var got []int
		for _, r := range p.Whir.Rounds {
			got = append(got, r.NumQueries)
		}
		if !slices.Equal(got, c.rounds) || p.LogFinalPolyLen() != c.logFinal || p.Logup.PowBits != c.logupPow {
			return fmt.Errorf("%s(%d): rounds %v log_final %d logup pow %d, want %v %d %d",
				c.name, c.h, got, p.LogFinalPolyLen(), p.Logup.PowBits, c.rounds, c.logFinal, c.logupPow)
		}
	}
	return nil
}

// checkApp21Soundness: the §4.6 worked example (App-VM bounds on app(21)) totals 100.09 bits,
// limited by WHIR round 2, with μ batching 105.63; app(24) has μ batching 102.63.
func checkApp21Soundness() error {
	for _, c := range []struct {
		h         int
		total, mu float64
	}{{21, 100.09, 105.63}, {24, 100.09, 102.63}} {
		p, _, err := params.Preset("app-100bit", c.h)
		if err != nil {
			return err
		}
		s, err := params.Calculate(p, params.AppVMBounds.Inputs(p))
		if err != nil {
			return err
		}
		if math.Abs(float64(s.TotalBits)-c.total) > 0.005 || math.Abs(float64(s.Whir.MuBatchingBits)-c.mu) > 0.005 {
			return fmt.Errorf("app(%d): total %.4f μ %.4f, want %.2f %.2f", c.h, float64(s.TotalBits), float64(s.Whir.MuBatchingBits), c.total, c.mu)
		}
	}
	return nil
}

// checkApp21Postcard: postcard bytes of app(21) against the §3.6 golden.
func checkApp21Postcard() error {
	p, _, err := params.Preset("app-100bit", 21)
	if err != nil {
		return err
	}
	want := []byte{0x04, 0x11, 0x80, 0x10, 0x01, 0x04, 0x03, 0xc1, 0x01, 0x58, 0x51, 0x0f, 0x14, 0x05, 0x00,
		0x81, 0x80, 0x80, 0xc0, 0x07, 0x07, 0x12, 0x03}
	if got := p.AppendPostcard(nil); !bytes.Equal(got, want) {
		return fmt.Errorf("postcard % x, want % x", got, want)
	}
	return nil
}
