package prover

import (
	"slices"
	"strings"
	"testing"
)

func TestParseGPUs(t *testing.T) {
	for in, want := range map[string][]int{"0": {0}, "0,1": {0, 1}, " 3 , 1": {3, 1}} {
		got, err := ParseGPUs(in)
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("ParseGPUs(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for in, want := range map[string]string{"": "empty list", "0,0": "listed twice", "-1": "not a device ordinal", "a": "not a device ordinal", "0,": "not a device ordinal"} {
		if _, err := ParseGPUs(in); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseGPUs(%q): %v, want an error saying %q", in, err, want)
		}
	}
}
