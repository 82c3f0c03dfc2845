package selftest

import (
	"fmt"

	"github.com/metalprove/metalprove/internal/field"
	"github.com/metalprove/metalprove/internal/transcript"
)

func transcriptChecks() []Check {
	return []Check{
		{Name: "transcript/fresh-samples", Run: checkTranscriptFreshSamples},
		{Name: "transcript/observe-sample", Run: checkTranscriptObserveSample},
		{Name: "transcript/pow", Run: checkTranscriptPoW},
	}
}

// checkTranscriptFreshSamples: 10 samples of a fresh transcript (spec vectors §D).
func checkTranscriptFreshSamples() error {
	want := []field.Fp{1054281681, 1878363991, 1704698758, 360581875, 883925857, 747404447, 128782440,
		1168947398, 311164911, 1836916456}
	var tr transcript.Transcript
	for i, w := range want {
		if got := tr.Sample(); got != w {
			return fmt.Errorf("fresh sample %d = %d, want %d", i, got, w)
		}
	}
	return nil
}

// checkTranscriptObserveSample: observe 1..5, sample_ext; observe 6..20, 3 samples;
// sample_bits(18) (spec vectors §D).
func checkTranscriptObserveSample() error {
	var tr transcript.Transcript
	for x := 1; x <= 5; x++ {
		tr.Observe(field.Fp(x))
	}
	if got, want := tr.SampleExt(), (field.Fp4{484056006, 1311515673, 942789063, 1655787167}); got != want {
		return fmt.Errorf("sample_ext after observing 1..5 = %v, want %v", got, want)
	}
	for x := 6; x <= 20; x++ {
		tr.Observe(field.Fp(x))
	}
	for i, w := range []field.Fp{198058590, 724706697, 1477290514} {
		if got := tr.Sample(); got != w {
			return fmt.Errorf("sample %d after observing 6..20 = %d, want %d", i, got, w)
		}
	}
	if got, want := tr.SampleBits(18), uint32(154222); got != want {
		return fmt.Errorf("sample_bits(18) = %d, want %d", got, want)
	}
	return nil
}

// checkTranscriptPoW: after observing 1,2,3, grind(8) and grind(12) return the smallest
// witnesses 732 and 6685, and the next samples match (spec vectors §E); a verifier's
// check_witness accepts them, rejects witness−1, and grind(0) leaves the transcript untouched.
func checkTranscriptPoW() error {
	for _, c := range []struct {
		bits       int
		witness    field.Fp
		nextSample field.Fp
	}{
		{8, 732, 560945968},
		{12, 6685, 1441659107},
	} {
		var tr transcript.Transcript
		for x := 1; x <= 3; x++ {
			tr.Observe(field.Fp(x))
		}
		verifier, other := tr, tr
		if w := tr.Grind(c.bits); w != c.witness {
			return fmt.Errorf("grind(%d) = %d, want %d", c.bits, w, c.witness)
		}
		if got := tr.Sample(); got != c.nextSample {
			return fmt.Errorf("sample after grind(%d) = %d, want %d", c.bits, got, c.nextSample)
		}
		if !verifier.CheckWitness(c.bits, c.witness) || verifier.Sample() != c.nextSample {
			return fmt.Errorf("check_witness(%d, %d) does not reproduce the prover", c.bits, c.witness)
		}
		if other.CheckWitness(c.bits, c.witness-1) {
			return fmt.Errorf("check_witness(%d, %d) accepted a witness below the smallest", c.bits, c.witness-1)
		}
	}
	var tr transcript.Transcript
	tr.Observe(1)
	before := tr
	if w := tr.Grind(0); w != 0 || !tr.Same(&before) {
		return fmt.Errorf("grind(0) = %d or touched the transcript", w)
	}
	return nil
}
