package stark

import (
	"github.com/metalprove/metalprove/internal/air"
	"github.com/metalprove/metalprove/internal/constraints"
)

// The pre-proof trace check (Checker). The report — which constraint fails on which row, which
// bus message does not balance — is always the host's (constraints.Check, CheckInteractions on
// the host matrices the traces were loaded from); a device checker only screens the traces first,
// so that the host evaluates the rows from the first failing one and runs the exact interaction
// check only when the device's LogUp sum says the buses do not balance.

// HostChecker checks traces on the host alone.
type HostChecker struct{}

// CheckTraces implements Checker.
func (HostChecker) CheckTraces(pk *ProvingKey, inputs []AirTraces, maxFailures int) error {
	return ReportTraces(pk, inputs, maxFailures, nil)
}

// TraceScreen is what a device checker found before the host reports.
type TraceScreen struct {
	// FirstFailure[i] is, for AIR i (verifying-key order), the first row on which a constraint
	// does not vanish, −1 when none does (and for absent AIRs).
	FirstFailure []int
	// Unbalanced is set when the interactions may not balance (a non-zero LogUp sum, or one the
	// device could not decide): the host check then names the messages.
	Unbalanced bool
}

// ReportTraces is HostChecker's check with the host's work limited by screen (nil: none): the
// constraints of AIR i are evaluated from row FirstFailure[i] on (not at all when −1), the exact
// interaction check runs only when Unbalanced. With a correct screen the result is HostChecker's.
func ReportTraces(pk *ProvingKey, inputs []AirTraces, maxFailures int, screen *TraceScreen) error {
	if maxFailures <= 0 {
		maxFailures = 10
	}
	if pk == nil || pk.VK == nil || pk.VK.MVK == nil || len(inputs) != pk.VK.NumAirs() {
		return inputErr("trace check: the inputs do not fit the proving key")
	}
	if screen != nil && len(screen.FirstFailure) != len(inputs) {
		return inputErr("trace check: %d screened AIRs for %d inputs", len(screen.FirstFailure), len(inputs))
	}
	e := &TraceCheckError{}
	var busAirs []air.Air
	var busInputs []air.TraceInput
	for i := range inputs {
		in := &inputs[i]
		if !in.Present() {
			continue
		}
		ti := air.TraceInput{CommonMain: *in.Common.Host(), Public: in.Public}
		if pre := pk.Preprocessed[i]; pre != nil {
			ti.Preprocessed = pre.Host()
		}
		for _, c := range in.Cached {
			ti.CachedMains = append(ti.CachedMains, *c.Host())
		}
		start := 0
		if screen != nil {
			start = screen.FirstFailure[i]
		}
		if start >= 0 && len(e.Failures) < maxFailures {
			fs, err := constraints.CheckFrom(pk.Airs[i], ti, maxFailures-len(e.Failures), start)
			if err != nil {
				return inputErr("AIR %d: %v", i, err)
			}
			for _, f := range fs {
				e.Failures = append(e.Failures, f)
				e.AirIndex = append(e.AirIndex, i)
			}
		}
		if len(pk.VK.MVK.PerAir[i].DAG.Interactions) > 0 {
			busAirs = append(busAirs, pk.Airs[i])
			busInputs = append(busInputs, ti)
		}
	}
	if len(busAirs) > 0 && (screen == nil || screen.Unbalanced) {
		ims, err := constraints.CheckInteractions(busAirs, busInputs)
		if err != nil {
			return inputErr("%v", err)
		}
		if len(ims) > maxFailures {
			ims = ims[:maxFailures]
		}
		e.Imbalances = ims
	}
	if len(e.Failures) > 0 || len(e.Imbalances) > 0 {
		return e
	}
	return nil
}
