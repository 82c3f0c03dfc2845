package prover

import (
	"errors"
	"fmt"
	"time"

	"github.com/rs/zerolog"

	"github.com/metalprove/metalprove/internal/air"
	"github.com/metalprove/metalprove/internal/backend/device"
	"github.com/metalprove/metalprove/internal/cmdutil"
	"github.com/metalprove/metalprove/internal/gpu"
	"github.com/metalprove/metalprove/internal/kernels"
	sp "github.com/metalprove/metalprove/internal/params"
	"github.com/metalprove/metalprove/internal/stark"
)

// Opening is a backend being opened, and the proving key of a trace file's AIRs being made on
// it, while the trace's cells are read: a CUDA driver's first initialisation takes about 100 ms
// and Keccak-f's keygen about 100 ms, as long as reading a keccakf-1024 trace. The AIRs come from
// the section headers (Headers.ScanAirs); when they cannot be had there, keygen waits for the
// statement (Key), whose reading then names the problem.
type Opening struct {
	// key, when set, is the proving-key file the proving key comes from (not the headers).
	key     *Key
	p       sp.SystemParams
	airs    []air.Air
	heights []int
	scanErr error
	done    chan opened
	o       *opened
	// resident, when set, is the Resident whose backend and kept keys the opening hands out
	// (Resident.startOpening): the caller neither closes the one nor frees the other
	// (ReleaseKey gives the key back); keyID names the key among those kept.
	resident *Resident
	keyID    string
}

// opened is what the opening goroutine made.
type opened struct {
	be     *Backend
	err    error
	open   time.Duration // the backend's opening (device and driver start, kernel modules)
	pk     *stark.ProvingKey
	keyErr error
	keygen time.Duration
	held   *residentKey // the resident's key that pk is (resident openings)
}

// StartOpening starts opening the backend (OpenBackendOn: the device of the settings, on GPU
// ordinal for CUDA) and, when h's AIRs can be had from its headers, making their proving key with
// parameters p. h may be nil (the headers could not be read). Either Backend or Release must
// follow. Where no AIR has a preprocessed trace (whose commitment needs the backend) and the
// backend is a device's, the key is made on the host beside the device's opening (the device
// backend's keygen uses only kernels.HostAbsorber), and the constraint kernels are prepared
// from its verifying keys, the programs' split shared with the backend (device.Shared). On a GPU
// that builds modules ahead (CUDA), the AIRs' constraint kernels are compiled meanwhile too
// (PrebuildConstraintCode), beside the device's own kernels.
func StartOpening(settings *cmdutil.Settings, reference bool, ordinal int, p sp.SystemParams, h *Headers, log *zerolog.Logger) *Opening {
	op := &Opening{p: p, done: make(chan opened, 1), scanErr: errors.New("no headers")}
	if h != nil {
		op.airs, op.heights, op.scanErr = h.ScanAirs()
	}
	hostKey := !reference && op.scanErr == nil && !anyPreprocessed(op.airs)
	var shared *device.Shared
	var host opened // the key made on the host (hostKey), once keyMade is closed
	keyMade := make(chan struct{})
	switch {
	case hostKey:
		shared = device.NewShared()
		go func() {
			t := time.Now()
			host.pk, host.keyErr = stark.Keygen(p, op.airs, nil, &stark.Backend{Absorber: kernels.HostAbsorber})
			host.keygen = time.Since(t)
			close(keyMade)
			if host.keyErr == nil {
				PrebuildConstraintCode(settings, ordinal, func() ([]string, []*air.VerifyingKey) { return provingKeyVKs(host.pk) }, shared, log)
			}
		}()
	case !reference && op.scanErr == nil:
		go PrebuildConstraintCode(settings, ordinal, func() ([]string, []*air.VerifyingKey) { return builtinVKs(p, op.airs) }, nil, log)
	}
	go func() {
		t0 := time.Now()
		be, err := openBackendShared(settings, reference, ordinal, shared, log)
		o := opened{be: be, err: err, open: time.Since(t0)}
		switch {
		case hostKey:
			<-keyMade
			o.pk, o.keyErr, o.keygen = host.pk, host.keyErr, host.keygen
			if err != nil && o.pk != nil { // no key without a backend, as below
				o.pk.Free()
				o.pk = nil
			}
		case err == nil && op.scanErr == nil:
			t := time.Now()
			o.pk, o.keyErr = stark.Keygen(p, op.airs, nil, be.Backend)
			o.keygen = time.Since(t)
		}
		op.done <- o
	}()
	return op
}

// anyPreprocessed reports whether an AIR of airs has a preprocessed trace (or is missing).
func anyPreprocessed(airs []air.Air) bool {
	for _, a := range airs {
		if a == nil || a.Width().HasPreprocessed() {
			return true
		}
	}
	return false
}

// StartOpeningKey starts opening the backend (as StartOpening) and making the proving key of k on
// it (its preprocessed traces committed there: stark.KeygenFromKey) while the cells are read; the
// constraint kernels are compiled ahead as StartOpening compiles them.
func StartOpeningKey(settings *cmdutil.Settings, reference bool, ordinal int, k *Key, log *zerolog.Logger) *Opening {
	op := &Opening{key: k, p: k.Params(), done: make(chan opened, 1)}
	var shared *device.Shared
	if !reference {
		// The key's own verifying keys are the proving key's (stark.KeygenFromKey): the backend
		// and the prebuild share their programs' split.
		shared = device.NewShared()
		go PrebuildConstraintCode(settings, ordinal, func() ([]string, []*air.VerifyingKey) { return keyVKs(k) }, shared, log)
	}
	go func() {
		t0 := time.Now()
		be, err := openBackendShared(settings, reference, ordinal, shared, log)
		o := opened{be: be, err: err, open: time.Since(t0)}
		if err == nil {
			t := time.Now()
			o.pk, o.keyErr = stark.KeygenFromKey(k.File.MVK, k.File.PreHash, k.Airs, be.Backend)
			o.keygen = time.Since(t)
		}
		op.done <- o
	}()
	return op
}

// wait waits for the goroutine, once.
func (op *Opening) wait() *opened {
	if op.o == nil {
		o := <-op.done
		op.o = &o
	}
	return op.o
}

// Release waits for the opening and frees what it made: the key and the backend (a resident's
// stay: the key is given back).
func (op *Opening) Release() {
	o := op.wait()
	if o.pk != nil {
		op.ReleaseKey(o.pk)
		o.pk = nil
	}
	if o.err == nil && o.be != nil && op.resident == nil {
		o.be.Close()
	}
	o.be = nil
}

// Owned reports whether the caller of Backend closes the backend (not a Resident's).
func (op *Opening) Owned() bool { return op.resident == nil }

// ReleaseKey ends the use of a key Key returned: freed, or given back to the Resident that keeps
// it. A second call for the same key does nothing.
func (op *Opening) ReleaseKey(pk *stark.ProvingKey) {
	if pk == nil {
		return
	}
	o := op.wait()
	if op.resident == nil {
		pk.Free()
		return
	}
	if o.held != nil && o.held.pk == pk {
		op.resident.give(o.held)
		o.held = nil
	}
}

// Backend waits for the backend; the caller closes it (or calls Release) when Owned.
func (op *Opening) Backend() (*Backend, error) {
	o := op.wait()
	return o.be, o.err
}

// OpenTime is how long the backend took to open (after Backend returned).
func (op *Opening) OpenTime() time.Duration { return op.wait().open }

// Key returns the proving key of st's AIRs on the backend and the time keygen took: the key made
// while the cells were read, unless the file changed in between (st's AIRs or heights are not
// those of the headers), else one made now. what names the input in errors: a device out of
// memory is a DeviceError, any other keygen failure a BadInputError. The caller ends its use
// with ReleaseKey.
func (op *Opening) Key(st *Statement, what string) (*stark.ProvingKey, time.Duration, error) {
	o := op.wait()
	pk, keyErr, keygen := o.pk, o.keyErr, o.keygen
	o.pk = nil // the caller's now
	if op.key != nil {
		if keyErr != nil {
			return nil, 0, keygenError(op.key.Path, keyErr)
		}
		return pk, keygen, nil
	}
	if pk != nil && !sameStatement(op.airs, op.heights, st) { // the file changed in between
		op.ReleaseKey(pk)
		pk = nil
	}
	if pk == nil && (keyErr == nil || op.scanErr != nil) {
		start := time.Now()
		pk, keyErr = stark.Keygen(op.p, st.Airs, nil, o.be.Backend)
		keygen = time.Since(start)
		if keyErr == nil && op.resident != nil {
			o.held = op.resident.keep(builtinKeyID(op.p, st.Airs, st.Heights()), nil, pk)
		}
	}
	if keyErr != nil {
		return nil, 0, keygenError(what, keyErr)
	}
	return pk, keygen, nil
}

// keygenError classifies a keygen error: a device out of memory is a DeviceError, any other
// failure a BadInputError naming what.
func keygenError(what string, err error) error {
	if errors.Is(err, gpu.ErrOutOfMemory) {
		return &cmdutil.DeviceError{Err: fmt.Errorf("keygen: %w", err)}
	}
	return &cmdutil.BadInputError{Err: fmt.Errorf("%s: %w", what, err)}
}
