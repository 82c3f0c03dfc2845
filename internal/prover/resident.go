package prover

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/metalprove/metalprove/internal/air"
	"github.com/metalprove/metalprove/internal/cmdutil"
	"github.com/metalprove/metalprove/internal/field"
	sp "github.com/metalprove/metalprove/internal/params"
	"github.com/metalprove/metalprove/internal/stark"
)

// residentKeys is how many proving keys a Resident keeps (the oldest made goes first);
// cellBuffersKept how many trace buffers (the largest).
const (
	residentKeys    = 4
	cellBuffersKept = 2
)

// Resident is a device backend kept open between proofs (what `metalprove serve` holds), with
// the proving keys it made: a proof through it (ProveRequest.Resident) neither opens the device
// nor makes a key it made before. A process that opens CUDA pays ≈ 300 ms for the driver and
// its context before any work (docs/perf-notes/one-shot.md); a resident backend pays it once.
// Keys are kept per AIR set and parameters (built-in AIRs: the parameters' digest and each
// section's AIR, width and height) or per key file (its absolute path, size and modification
// time, and whether insecure parameters were allowed). Proofs through one Resident run one at a
// time, in the order they ask.
type Resident struct {
	be     *Backend
	opened time.Duration

	mu sync.Mutex // held by the proof in progress

	keysMu sync.Mutex
	keys   []*residentKey // oldest first

	cells cellBuffers
}

// residentKey is a proving key a Resident made, with the key file it came from (nil: built-in
// AIRs).
type residentKey struct {
	id   string
	key  *Key
	pk   *stark.ProvingKey
	used int // proofs that hold pk now (it is freed only when none does)
	gone bool
}

// OpenResident opens the device backend of the settings' device kind (on GPU ordinal for
// CUDA) to keep it open; Close releases it.
func OpenResident(settings *cmdutil.Settings, ordinal int, log *zerolog.Logger) (*Resident, error) {
	t := time.Now()
	be, err := OpenDeviceBackend(settings, DeviceKind(settings), ordinal, nil, log)
	if err != nil {
		return nil, err
	}
	return &Resident{be: be, opened: time.Since(t)}, nil
}

// Name is the backend's name ("device (…)").
func (r *Resident) Name() string { return r.be.Name }

// OpenTime is how long the device took to open.
func (r *Resident) OpenTime() time.Duration { return r.opened }

// Keys is the number of proving keys kept.
func (r *Resident) Keys() int {
	r.keysMu.Lock()
	defer r.keysMu.Unlock()
	return len(r.keys)
}

// Close frees the kept keys and releases the device; proofs must have ended.
func (r *Resident) Close() {
	r.keysMu.Lock()
	for _, k := range r.keys {
		k.pk.Free()
	}
	r.keys = nil
	r.keysMu.Unlock()
	r.be.Close()
}

// lock waits for the proofs before this one; the returned function ends this one's turn.
func (r *Resident) lock() (time.Duration, func()) {
	t := time.Now()
	r.mu.Lock()
	return time.Since(t), r.mu.Unlock
}

// fileKeyID identifies a key file's contents by its absolute path, size and modification time.
func fileKeyID(path string, allowInsecure bool) (string, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", err
	}
	st, err := os.Stat(abs)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("file %s %d %d %t", abs, st.Size(), st.ModTime().UnixNano(), allowInsecure), nil
}

// builtinKeyID identifies the proving key of built-in AIRs with parameters p.
func builtinKeyID(p sp.SystemParams, airs []air.Air, heights []int) string {
	dg := stark.ParamsDigest(p)
	var b strings.Builder
	fmt.Fprintf(&b, "airs %x", dg[:])
	for i, a := range airs {
		fmt.Fprintf(&b, " %s/%d/%d/%d", a.Name(), a.Width().MainWidth(), a.NumPublicValues(), heights[i])
	}
	return b.String()
}

// take returns the kept key of id (nil when there is none), marked in use.
func (r *Resident) take(id string) *residentKey {
	if id == "" {
		return nil
	}
	r.keysMu.Lock()
	defer r.keysMu.Unlock()
	for _, k := range r.keys {
		if k.id == id {
			k.used++
			return k
		}
	}
	return nil
}

// keep adds a key made now under id, in use by the caller, and lets the oldest go beyond
// residentKeys (freed once no proof holds it).
func (r *Resident) keep(id string, key *Key, pk *stark.ProvingKey) *residentKey {
	k := &residentKey{id: id, key: key, pk: pk, used: 1}
	if id == "" {
		k.gone = true // not kept: freed when the proof ends
		return k
	}
	r.keysMu.Lock()
	defer r.keysMu.Unlock()
	r.keys = append(r.keys, k)
	for len(r.keys) > residentKeys {
		old := r.keys[0]
		r.keys = r.keys[1:]
		old.gone = true
		if old.used == 0 {
			old.pk.Free()
		}
	}
	return k
}

// give ends a proof's use of k.
func (r *Resident) give(k *residentKey) {
	r.keysMu.Lock()
	defer r.keysMu.Unlock()
	k.used--
	if k.gone && k.used == 0 {
		k.pk.Free()
	}
}

// fileKey returns the key file path read (allowInsecure as ReadKey), from the keys kept when it
// was read before, and the identity under which its proving key is kept.
func (r *Resident) fileKey(path string, allowInsecure bool) (*Key, string, error) {
	id, err := fileKeyID(path, allowInsecure)
	if err != nil {
		return nil, "", &cmdutil.BadInputError{Err: fmt.Errorf("--key %s: %w", path, cmdutil.UnwrapPath(err))}
	}
	r.keysMu.Lock()
	for _, k := range r.keys {
		if k.id == id {
			r.keysMu.Unlock()
			return k.key, id, nil
		}
	}
	r.keysMu.Unlock()
	k, err := ReadKey(path, allowInsecure)
	return k, id, err
}

// startOpening is StartOpening (k nil: built-in AIRs from h's headers) or StartOpeningKey on the
// resident backend, called in the proof's turn (lock): the proving key taken from those kept, or
// made now and then kept under keyID (a key file's: fileKey; "" for built-in AIRs, whose identity
// comes from the headers).
func (r *Resident) startOpening(p sp.SystemParams, h *Headers, k *Key, keyID string) *Opening {
	op := &Opening{key: k, p: p, done: make(chan opened, 1), resident: r, scanErr: errors.New("no headers")}
	if k == nil && h != nil {
		op.airs, op.heights, op.scanErr = h.ScanAirs()
	}
	if k == nil && op.scanErr == nil {
		keyID = builtinKeyID(p, op.airs, op.heights)
	}
	op.keyID = keyID
	go func() {
		o := opened{be: r.be}
		if rk := r.take(keyID); rk != nil {
			o.held = rk
			o.pk = rk.pk
			op.done <- o
			return
		}
		t := time.Now()
		switch {
		case k != nil:
			o.pk, o.keyErr = stark.KeygenFromKey(k.File.MVK, k.File.PreHash, k.Airs, r.be.Backend)
		case op.scanErr == nil:
			o.pk, o.keyErr = stark.Keygen(p, op.airs, nil, r.be.Backend)
		}
		o.keygen = time.Since(t)
		if o.keyErr == nil && o.pk != nil {
			o.held = r.keep(keyID, k, o.pk)
		}
		op.done <- o
	}()
	return op
}

// cellBuffers keeps the cell buffers of a Resident's finished proofs for the next traces' reads:
// a new slice's pages are faulted in by the read itself (a keccakf-1024 trace's 345 MB), a kept
// one's are in memory already.
type cellBuffers struct {
	mu   sync.Mutex
	free [][]field.Fp
}

// cellArena is one proof's use of the kept buffers: alloc hands out buffers (tracefile's
// ReadAllInto), release gives them back once the proof no longer reads its cells.
type cellArena struct {
	pool  *cellBuffers
	taken [][]field.Fp
}

func (c *cellBuffers) arena() *cellArena { return &cellArena{pool: c} }

// alloc returns a buffer of at least n cells: the smallest kept one that holds them, else a new
// one.
func (a *cellArena) alloc(n int) []field.Fp {
	c := a.pool
	c.mu.Lock()
	best := -1
	for i, b := range c.free {
		if cap(b) >= n && (best < 0 || cap(b) < cap(c.free[best])) {
			best = i
		}
	}
	var buf []field.Fp
	if best >= 0 {
		buf = c.free[best][:n]
		c.free = append(c.free[:best], c.free[best+1:]...)
	}
	c.mu.Unlock()
	if buf == nil {
		buf = make([]field.Fp, n)
	}
	a.taken = append(a.taken, buf)
	return buf
}

// release gives the arena's buffers back; the pool keeps the cellBuffersKept largest.
func (a *cellArena) release() {
	c := a.pool
	c.mu.Lock()
	defer c.mu.Unlock()
	c.free = append(c.free, a.taken...)
	a.taken = nil
	slices.SortFunc(c.free, func(x, y []field.Fp) int { return cap(y) - cap(x) })
	for i := cellBuffersKept; i < len(c.free); i++ {
		c.free[i] = nil
	}
	c.free = c.free[:min(len(c.free), cellBuffersKept)]
}
