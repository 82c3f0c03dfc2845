package trace

import (
	"errors"
	"fmt"

	"github.com/rs/zerolog"

	"github.com/metalprove/metalprove/internal/air"
	"github.com/metalprove/metalprove/internal/backend/device"
	"github.com/metalprove/metalprove/internal/cmdutil"
	"github.com/metalprove/metalprove/internal/constraints"
	"github.com/metalprove/metalprove/internal/gpu"
	"github.com/metalprove/metalprove/internal/prover"
	"github.com/metalprove/metalprove/internal/stark"
)

// sectionChecker runs the trace check's evaluations on a device (--device; auto: a GPU when one
// is usable, else the host device): the device finds each section's first failing row and
// whether the interactions of all sections balance (a LogUp sum with random challenges); the host
// then reports from there exactly as it does alone (constraints.CheckFrom from the first failing
// row, constraints.CheckInteractions only when the sum is not zero), so the output is unchanged.
// A section the device cannot take (a height that is not a power of two) is checked on the host.
type sectionChecker struct {
	log zerolog.Logger
	// opened is the device backend (nil: everything on the host), be the device backend itself.
	opened *prover.Backend
	be     *device.Backend
	// bus are the loaded sections with interactions; hostBus is set when one of them is not on
	// the device (the balance is then the host's).
	bus     []*stark.AirInput
	hostBus bool
	loaded  []stark.Trace
}

// hostOnlyCheck makes the checker evaluate everything on the host (tests compare the two).
var hostOnlyCheck = false

// openSectionChecker opens the device of the settings (prover.OpenDeviceBackend: --device, auto
// when unset, capped at --device-memory).
func openSectionChecker(settings *cmdutil.Settings, log *zerolog.Logger) (*sectionChecker, error) {
	if hostOnlyCheck {
		return &sectionChecker{log: *log, hostBus: true}, nil
	}
	opened, err := prover.OpenDeviceBackend(settings, prover.DeviceKind(settings), 0, nil, log)
	if err != nil {
		return nil, err
	}
	log.Debug().Str("device", opened.Device().Name()).Msg("trace check on the device")
	return &sectionChecker{log: *log, opened: opened, be: opened.DeviceBackend()}, nil
}

func (c *sectionChecker) close() {
	for _, t := range c.loaded {
		t.Free()
	}
	if c.opened != nil {
		c.opened.Close()
	}
}

// load puts a section's parts on the device; nil when the device cannot take it.
func (c *sectionChecker) load(a air.Air, in air.TraceInput) (*stark.AirInput, error) {
	vk, err := constraints.CheckKey(a)
	if err != nil {
		return nil, err
	}
	parts, err := constraints.CheckParts(a, in)
	if err != nil {
		return nil, err
	}
	h := parts[0].Height
	for _, m := range parts {
		if m.Height != h || m.Check() != nil {
			return nil, fmt.Errorf("%w: air %s: parts of different shapes", air.ErrShape, a.Name())
		}
	}
	if h < 1 || h&(h-1) != 0 {
		return nil, nil
	}
	ai := &stark.AirInput{VK: vk, Public: in.Public}
	for q, m := range parts {
		t, err := c.be.LoadTrace(fmt.Sprintf("%s part %d", a.Name(), q), m)
		if err != nil {
			return nil, deviceErr(err)
		}
		c.loaded = append(c.loaded, t)
		switch {
		case q == 0:
			ai.Common = t
		case q == 1 && a.Width().HasPreprocessed():
			ai.Preprocessed = t
		default:
			ai.Cached = append(ai.Cached, t)
		}
	}
	return ai, nil
}

// checkConstraints is checkConstraints with the device finding the first failing row.
func (c *sectionChecker) checkConstraints(a air.Air, in air.TraceInput, maxFailures int) (*checkResult, error) {
	sc, err := air.Symbolic(a)
	if err != nil {
		return nil, err
	}
	var ai *stark.AirInput
	if c.be != nil {
		if ai, err = c.load(a, in); err != nil {
			return nil, err
		}
	}
	if ai == nil {
		c.hostBus = c.hostBus || len(sc.Interactions) > 0
		return checkConstraints(a, in, maxFailures)
	}
	if len(sc.Interactions) > 0 {
		c.bus = append(c.bus, ai)
	}
	res := &checkResult{constraints: len(sc.Constraints), interactions: len(sc.Interactions)}
	first, err := c.be.FirstFailures([]*stark.AirInput{ai})
	if err != nil {
		return nil, deviceErr(err)
	}
	if first[0] >= 0 {
		if res.failures, err = constraints.CheckFrom(a, in, maxFailures, first[0]); err != nil {
			return nil, err
		}
	}
	return res, nil
}

// checkInteractions is constraints.CheckInteractions, run only when the device's LogUp sum of the
// loaded sections is not zero.
func (c *sectionChecker) checkInteractions(airs []air.Air, inputs []air.TraceInput) ([]air.Imbalance, error) {
	if !c.hostBus {
		ok, err := c.be.InteractionsBalance(0, c.bus)
		if err != nil {
			return nil, deviceErr(err)
		}
		if ok {
			return nil, nil
		}
	}
	return constraints.CheckInteractions(airs, inputs)
}

// deviceErr marks a device's out-of-memory error as such (exit status 5).
func deviceErr(err error) error {
	if errors.Is(err, gpu.ErrOutOfMemory) {
		return &cmdutil.DeviceError{Err: err}
	}
	return err
}
