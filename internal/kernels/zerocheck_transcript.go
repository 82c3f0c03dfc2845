package kernels

import (
	"fmt"

	"github.com/metalprove/metalprove/internal/field"
	"github.com/metalprove/metalprove/internal/gpu"
)

// ZcTrRounds holds what the batch constraint sumcheck's multilinear rounds need on the device
// to follow one another without the host (zc_tr_round, with a DeviceTranscript): per trace the
// claims R_{j−1}(r_{j−1}) of its three families (Zc, Num, Den) and two scratch values, the
// stage's running factors eqz, eqs and tail, and the constants: the traces' weights in s_j, their
// ñ, the Lagrange weights of the points 0..d and per round ξ_{l+j−1}, 1/(1 − ξ) and
// eqAtSmall(ξ, X) for X = 1..d+1. One buffer of uints, Fp4 values Montgomery (layout in
// zc_tr_round's comment).
type ZcTrRounds struct {
	dev                            *gpu.Device
	traces, d, rounds              int
	nliftAt, lagAt, mixAt, roundAt int // as ZcTrRoundParams (uint, uint, Fp4, Fp4 indices)
	buf                            *gpu.Array[uint32]
}

// ZcTrSegment is what ZcTrRounds.Write uploads before a run of rounds.
type ZcTrSegment struct {
	// Claims, when not nil, are the claims before the segment's first round, per trace (Zc, Num,
	// Den; any value for a trace not in that round); nil keeps the device's, which the previous
	// segment's last round left.
	Claims [][3]field.Fp4
	// Eqz, Eqs and Tail are the stage's factors at the segment's first round.
	Eqz, Eqs, Tail field.Fp4
	// Mix holds per trace the weights of R^Zc, R^Num, R^Den in s_j; NLift per trace ñ_T.
	Mix   [][3]field.Fp4
	NLift []int
	// Xi holds ξ_{l+j−1} for every round j = 1..rounds.
	Xi []field.Fp4
}

// NewZcTrRounds allocates the buffer for traces traces, constraint degree d and rounds rounds.
func NewZcTrRounds(dev *gpu.Device, traces, d, rounds int) (*ZcTrRounds, error) {
	if traces < 1 || d < 1 || d > 64 || rounds < 1 {
		return nil, fmt.Errorf("kernels: ZcTrRounds: %d traces, degree %d, %d rounds", traces, d, rounds)
	}
	z := &ZcTrRounds{dev: dev, traces: traces, d: d, rounds: rounds}
	z.mixAt = 9*traces + 3
	z.nliftAt = 4 * (z.mixAt + 3*traces)
	z.lagAt = z.nliftAt + 4*((traces+3)/4)
	z.roundAt = (z.lagAt + 4*((2*(d+1)+3)/4)) / 4
	var err error
	if z.buf, err = gpu.AllocArray[uint32](dev, "constraint rounds' transcript state", 4*(z.roundAt+rounds*(d+3))); err != nil {
		return nil, err
	}
	return z, nil
}

// Close frees the buffer.
func (z *ZcTrRounds) Close() {
	if z.buf != nil {
		z.buf.Free()
		z.buf = nil
	}
}

// Write uploads s (one upload; the claims' scratch is zeroed with them).
func (z *ZcTrRounds) Write(s ZcTrSegment) error {
	if z.buf == nil {
		return fmt.Errorf("kernels: ZcTrRounds used after Close")
	}
	T, d := z.traces, z.d
	if (s.Claims != nil && len(s.Claims) != T) || len(s.Mix) != T || len(s.NLift) != T || len(s.Xi) != z.rounds {
		return fmt.Errorf("kernels: ZcTrRounds: %d claims, %d weights, %d ñ for %d traces, %d ξ for %d rounds",
			len(s.Claims), len(s.Mix), len(s.NLift), T, len(s.Xi), z.rounds)
	}
	w := make([]uint32, z.buf.Len())
	put := func(at int, x field.Fp4) { // at: Fp4 index
		m := MontFp4(x)
		copy(w[4*at:], m[:])
	}
	for t, c := range s.Claims {
		for k := range 3 {
			put(3*t+k, c[k])
		}
	}
	put(9*T, s.Eqz)
	put(9*T+1, s.Eqs)
	put(9*T+2, s.Tail)
	for t, m := range s.Mix {
		for k := range 3 {
			put(z.mixAt+3*t+k, m[k])
		}
		if s.NLift[t] < 0 {
			return fmt.Errorf("kernels: ZcTrRounds: trace %d has ñ %d", t, s.NLift[t])
		}
		w[z.nliftAt+t] = uint32(s.NLift[t])
	}
	// L_i(d+1) and 1/Π_{k≠i}(i − k) for the points 0..d.
	for i := 0; i <= d; i++ {
		den, num := field.One, field.One
		for k := 0; k <= d; k++ {
			if k != i {
				den = den.Mul(field.Fp(uint32(i)).Sub(field.Fp(uint32(k))))
				num = num.Mul(field.Fp(uint32(d + 1 - k)))
			}
		}
		inv := den.Inverse()
		w[z.lagAt+i] = uint32(MontOf(num.Mul(inv)))
		w[z.lagAt+d+1+i] = uint32(MontOf(inv))
	}
	for j, xi := range s.Xi {
		if xi == field.Fp4One { // probability 2^−124: R(0) would need the program at X = 0
			return fmt.Errorf("kernels: ZcTrRounds: ξ of round %d is 1", j+1)
		}
		at := z.roundAt + j*(d+3)
		put(at, xi)
		put(at+1, field.Fp4One.Sub(xi).Inverse())
		for x := 1; x <= d+1; x++ {
			fx := field.Lift(field.Fp(uint32(x)))
			put(at+1+x, field.Fp4One.Sub(xi).Mul(field.Fp4One.Sub(fx)).Add(xi.Mul(fx)))
		}
	}
	from := 0
	if s.Claims == nil {
		from = 4 * 9 * T
	}
	return z.buf.Write(from, w[from:])
}

// zcTrScratch is zc_tr_round's threadgroup memory for tpg threads.
func (z *ZcTrRounds) zcTrScratch(tpg int) uint32 {
	np := z.d + 1
	return uint32(4 * (48 + p2gRCLen + 8*np + 8*max(tpg, np)))
}

// EncodeZcRound encodes round j's transcript step (zc_tr_round) after its sums were encoded into
// sums (Zerocheck.EncodeRound, rndWidth uints a trace): s_j(1..d+1) into Log[at .. at+d], observed,
// r_j sampled into Log[at+d+1], where the next round's folds read it (EncodeFoldLogged), and z's
// claims and factors moved to r_j.
func (t *DeviceTranscript) EncodeZcRound(b *gpu.Batch, z *ZcTrRounds, sums *gpu.Array[uint32], rndWidth, j, at int) error {
	if err := t.live(); err != nil {
		return err
	}
	if z.buf == nil {
		return fmt.Errorf("kernels: ZcTrRounds used after Close")
	}
	if j < 1 || j > z.rounds || at < 0 || at+z.d+2 > t.Log.Len() {
		return fmt.Errorf("kernels: DeviceTranscript: constraint round %d of %d at %d of a log of %d", j, z.rounds, at, t.Log.Len())
	}
	if rndWidth < 12*z.d || sums.Len() < z.traces*rndWidth {
		return fmt.Errorf("kernels: DeviceTranscript: round sums of %d uints for %d traces of %d", sums.Len(), z.traces, rndWidth)
	}
	tpg, err := t.groupFor("zc_tr_round", 32)
	if err != nil {
		return err
	}
	dispatchZcTrRound(b, gpu.D1(1), gpu.D1(uint32(tpg)), sums.Buffer, z.buf.Buffer, t.Log.Buffer, t.state.Buffer, t.rc.Buffer,
		zcTrRoundParams{traces: uint32(z.traces), d: uint32(z.d), rndWidth: uint32(rndWidth), j: uint32(j),
			nliftAt: uint32(z.nliftAt), lagAt: uint32(z.lagAt), mixAt: uint32(z.mixAt), roundAt: uint32(z.roundAt + (j-1)*(z.d+3)), at: uint32(at)},
		z.zcTrScratch(tpg))
	return b.Err()
}
