package stark

import (
	"errors"
	"fmt"
	"slices"

	"github.com/metalprove/metalprove/internal/air"
	"github.com/metalprove/metalprove/internal/constraints"
	"github.com/metalprove/metalprove/internal/field"
	"github.com/metalprove/metalprove/internal/params"
)

// Proving and verifying keys (spec B §1.6–§1.8): the multi-AIR verifying key of air.MultiKeygen
// with every preprocessed trace committed by the stacked PCS, and its prehash.

// ErrKeygen is wrapped by every key-generation error.
var ErrKeygen = errors.New("stark: keygen")

// VerifyingKey is MultiStarkVerifyingKey: the parameters, the per-AIR keys and trace-height
// constraints (MultiVerifyingKey0) and the prehash observed first in every transcript.
type VerifyingKey struct {
	MVK     *air.MultiVerifyingKey0
	PreHash Digest
	// Programs are the AIRs' constraint programs (internal/constraints), compiled once here; a
	// device backend uploads them once.
	Programs []*constraints.Program
}

// Params returns the system parameters the key was made for.
func (vk *VerifyingKey) Params() params.SystemParams { return vk.MVK.Params }

// program is AIR i's compiled program (nil for a key built without them).
func (vk *VerifyingKey) program(i int) *constraints.Program {
	if i < len(vk.Programs) {
		return vk.Programs[i]
	}
	return nil
}

// NumAirs is the number of AIRs of the key.
func (vk *VerifyingKey) NumAirs() int { return len(vk.MVK.PerAir) }

// ProvingKey is the verifying key plus what the prover needs: the AIRs and, per AIR, the
// preprocessed trace and its commitment (handles of the backend the key was made with: the
// trace stays loaded there for as long as the key is used).
type ProvingKey struct {
	VK   *VerifyingKey
	Airs []air.Air
	// Preprocessed[i] and PreprocessedCommit[i] are nil when AIR i has no preprocessed trace.
	Preprocessed       []Trace
	PreprocessedCommit []Committed
}

// AirName is AIR i's name ("AIR i" when the key has no AIR for it).
func (pk *ProvingKey) AirName(i int) string {
	if i >= 0 && i < len(pk.Airs) && pk.Airs[i] != nil {
		return pk.Airs[i].Name()
	}
	return fmt.Sprintf("AIR %d", i)
}

// Program is AIR i's compiled constraint program (nil for a key built without them).
func (vk *VerifyingKey) Program(i int) *constraints.Program { return vk.program(i) }

// Free releases the preprocessed traces and commitments held on the key's backend; a second
// Free does nothing.
func (pk *ProvingKey) Free() {
	for i, t := range pk.Preprocessed {
		if t != nil {
			t.Free()
			pk.Preprocessed[i] = nil
		}
		if c := pk.PreprocessedCommit[i]; c != nil {
			c.Free()
			pk.PreprocessedCommit[i] = nil
		}
	}
}

// Params returns the system parameters the key was made for.
func (pk *ProvingKey) Params() params.SystemParams { return pk.VK.MVK.Params }

// Keygen builds the proving key of airs (verifying-key order) for parameters p: each AIR's
// preprocessed trace (air.PreprocessedAir) is committed with be (stacked_commit of the single
// matrix, spec B §1.6 item 6), then air.MultiKeygen runs with AIRs listed in required marked
// is_required (nil: all optional, as OpenVM's add_air). The verifying key (pk.VK) depends only on
// p and the AIRs: a verifier recomputes it with any backend (the CPU reference is the natural
// choice) and gets the same prehash.
func Keygen(p params.SystemParams, airs []air.Air, required []bool, be *Backend) (*ProvingKey, error) {
	if err := p.Validate(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrKeygen, err)
	}
	if len(airs) == 0 {
		return nil, fmt.Errorf("%w: no AIRs", ErrKeygen)
	}
	pk := &ProvingKey{
		Airs:               append([]air.Air(nil), airs...),
		Preprocessed:       make([]Trace, len(airs)),
		PreprocessedCommit: make([]Committed, len(airs)),
	}
	pre := make([]*air.PreprocessedVK, len(airs))
	for i, a := range airs {
		if a == nil {
			return nil, fmt.Errorf("%w: AIR %d is nil", ErrKeygen, i)
		}
		if !a.Width().HasPreprocessed() {
			continue
		}
		pa, ok := a.(air.PreprocessedAir)
		if !ok {
			return nil, fmt.Errorf("%w: AIR %d (%s) has a preprocessed width but no preprocessed trace", ErrKeygen, i, a.Name())
		}
		m := pa.PreprocessedTrace()
		h := m.Height
		if m.Width != a.Width().Preprocessed || h < 1 || h&(h-1) != 0 || len(m.Values) != m.Width*h {
			return nil, fmt.Errorf("%w: AIR %d (%s): preprocessed trace is %d×%d (%d values), want width %d and a power-of-two height",
				ErrKeygen, i, a.Name(), h, m.Width, len(m.Values), a.Width().Preprocessed)
		}
		logH := log2Exact(h)
		if logH > p.LogStackedHeight() {
			return nil, fmt.Errorf("%w: AIR %d (%s): preprocessed height 2^%d exceeds the stacked height 2^%d",
				ErrKeygen, i, a.Name(), logH, p.LogStackedHeight())
		}
		t, c, err := commitPreprocessed(p, be, i, a, m)
		if err != nil {
			pk.Free()
			return nil, err
		}
		pk.Preprocessed[i], pk.PreprocessedCommit[i] = t, c
		pre[i] = &air.PreprocessedVK{Commit: c.Root(), HypercubeDim: logH - p.LSkip, StackingWidth: c.Layout().Width}
	}
	mvk, err := air.MultiKeygen(p, airs, required, pre)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrKeygen, err)
	}
	if pk.VK, err = compileKey(mvk, mvk.PreHashWith(be.Absorber), airs); err != nil {
		pk.Free()
		return nil, err
	}
	return pk, nil
}

// compileKey is the verifying key of mvk with every AIR's constraint program compiled.
func compileKey(mvk *air.MultiVerifyingKey0, preHash Digest, airs []air.Air) (*VerifyingKey, error) {
	vk := &VerifyingKey{MVK: mvk, PreHash: preHash, Programs: make([]*constraints.Program, len(mvk.PerAir))}
	for i, avk := range mvk.PerAir {
		var err error
		if vk.Programs[i], err = constraints.Compile(avk, constraints.All); err != nil {
			return nil, fmt.Errorf("%w: AIR %d (%s): %w", ErrKeygen, i, airs[i].Name(), err)
		}
	}
	return vk, nil
}

// KeygenFromKey builds the proving key of a verifying key made elsewhere — OpenVM's keygen, or
// a proving-key file — without rebuilding it: mvk and preHash are used as they are (the caller
// has checked them: air.DecodeMultiVerifyingKey does). airs[i] is AIR i of mvk: its name, and its
// preprocessed trace, which is committed on be; that commitment (root, hypercube dimension,
// stacking width) must be the key's, else the error names the AIR. The proofs are those of the
// prover that made the key.
func KeygenFromKey(mvk *air.MultiVerifyingKey0, preHash Digest, airs []air.Air, be *Backend) (*ProvingKey, error) {
	if mvk == nil {
		return nil, fmt.Errorf("%w: no verifying key", ErrKeygen)
	}
	p := mvk.Params
	if err := p.Validate(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrKeygen, err)
	}
	if len(airs) != len(mvk.PerAir) || len(airs) == 0 {
		return nil, fmt.Errorf("%w: %d AIRs for a key of %d", ErrKeygen, len(airs), len(mvk.PerAir))
	}
	pk := &ProvingKey{
		Airs:               append([]air.Air(nil), airs...),
		Preprocessed:       make([]Trace, len(airs)),
		PreprocessedCommit: make([]Committed, len(airs)),
	}
	for i, a := range airs {
		avk := mvk.PerAir[i]
		if a == nil {
			return nil, fmt.Errorf("%w: AIR %d is nil", ErrKeygen, i)
		}
		w, kw := a.Width(), avk.Width
		if w.Preprocessed != kw.Preprocessed || w.CommonMain != kw.CommonMain || !slices.Equal(w.CachedMains, kw.CachedMains) || a.NumPublicValues() != avk.NumPublicValues {
			return nil, fmt.Errorf("%w: AIR %d (%s) does not fit the key's widths and public values", ErrKeygen, i, a.Name())
		}
		if avk.Preprocessed == nil {
			continue
		}
		pa, ok := a.(air.PreprocessedAir)
		if !ok {
			pk.Free()
			return nil, fmt.Errorf("%w: AIR %d (%s) has a preprocessed width but no preprocessed trace", ErrKeygen, i, a.Name())
		}
		m := pa.PreprocessedTrace()
		h := m.Height
		logH, okH := field.Log2(h)
		if m.Width != kw.Preprocessed || !okH || len(m.Values) != m.Width*h || logH-p.LSkip != avk.Preprocessed.HypercubeDim {
			pk.Free()
			return nil, fmt.Errorf("%w: AIR %d (%s): preprocessed trace is %d×%d, the key's is %d×%d", ErrKeygen, i, a.Name(),
				h, m.Width, 1<<max(avk.Preprocessed.HypercubeDim+p.LSkip, 0), kw.Preprocessed)
		}
		t, c, err := commitPreprocessed(p, be, i, a, m)
		if err != nil {
			pk.Free()
			return nil, err
		}
		pk.Preprocessed[i], pk.PreprocessedCommit[i] = t, c
		if c.Root() != avk.Preprocessed.Commit || c.Layout().Width != avk.Preprocessed.StackingWidth {
			pk.Free()
			return nil, fmt.Errorf("%w: AIR %d (%s): the preprocessed trace given commits to %v (stacking width %d), the key holds %v (stacking width %d)",
				ErrKeygen, i, a.Name(), c.Root(), c.Layout().Width, avk.Preprocessed.Commit, avk.Preprocessed.StackingWidth)
		}
	}
	var err error
	if pk.VK, err = compileKey(mvk, preHash, airs); err != nil {
		pk.Free()
		return nil, err
	}
	return pk, nil
}

// commitPreprocessed loads AIR i's preprocessed trace m on be and commits it; on error nothing of
// it is left on be.
func commitPreprocessed(p params.SystemParams, be *Backend, i int, a air.Air, m air.Matrix) (Trace, Committed, error) {
	t, err := be.Loader.LoadTrace(a.Name()+" preprocessed", &air.Matrix{Values: m.Values, Width: m.Width, Height: m.Height})
	if err != nil {
		return nil, nil, fmt.Errorf("%w: AIR %d (%s): load preprocessed trace: %w", ErrKeygen, i, a.Name(), err)
	}
	c, err := be.Committer.Commit(p, []Trace{t})
	if err != nil {
		t.Free()
		return nil, nil, fmt.Errorf("%w: AIR %d (%s): commit preprocessed trace: %w", ErrKeygen, i, a.Name(), err)
	}
	return t, c, nil
}

// Share returns pk for another backend of the same process (another queue or GPU proving at the
// same time as pk's backend): the verifying key with its compiled constraint programs and the
// AIRs are pk's, shared read-only; the preprocessed traces, whose handles belong to one backend,
// are loaded and committed again on be (the commitment must equal pk's). The returned key's Free
// releases only be's handles; pk must outlive it.
func (pk *ProvingKey) Share(be *Backend) (*ProvingKey, error) {
	p := pk.Params()
	out := &ProvingKey{VK: pk.VK, Airs: pk.Airs, Preprocessed: make([]Trace, len(pk.Airs)), PreprocessedCommit: make([]Committed, len(pk.Airs))}
	for i, a := range pk.Airs {
		if pk.Preprocessed[i] == nil {
			continue
		}
		m := a.(air.PreprocessedAir).PreprocessedTrace() // Keygen checked it
		t, c, err := commitPreprocessed(p, be, i, a, m)
		if err != nil {
			out.Free()
			return nil, err
		}
		out.Preprocessed[i], out.PreprocessedCommit[i] = t, c
		if c.Root() != pk.PreprocessedCommit[i].Root() {
			out.Free()
			return nil, fmt.Errorf("%w: AIR %d (%s): the preprocessed commitment on the second backend differs from the key's", ErrKeygen, i, a.Name())
		}
	}
	return out, nil
}

// log2Exact returns log2(n) for a power of two n ≥ 1 the caller has validated.
func log2Exact(n int) int {
	k, _ := field.Log2(n)
	return k
}
