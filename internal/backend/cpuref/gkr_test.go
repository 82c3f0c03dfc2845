package cpuref

import (
	"errors"
	"testing"

	"github.com/metalprove/metalprove/internal/air"
	"github.com/metalprove/metalprove/internal/air/testair"
	"github.com/metalprove/metalprove/internal/field"
	"github.com/metalprove/metalprove/internal/params"
	"github.com/metalprove/metalprove/internal/stark"
)

// TestGkrProverRounds checks the backend's layer sumcheck against the tree: s(0) + s(1) equals
// the running claim of every round, and the last claim equals eq·(cross terms of the claims).
func TestGkrProverRounds(t *testing.T) {
	p := params.TestParamsSmall(2, 8, 2)
	ins := testair.InteractionsFixture11(false)
	ins[0], ins[1] = ins[1], ins[0] // receiver (8 rows) first: trace order
	var traces []*stark.AirInput
	var hs, ks []int
	for i, in := range ins {
		vk, err := air.Keygen(in.Air, p.MaxConstraintDegree, true, nil)
		if err != nil {
			t.Fatal(err)
		}
		m := in.Trace.CommonMain
		traces = append(traces, &stark.AirInput{AirIndex: i, VK: vk, Common: Trace{M: &air.Matrix{Values: m.Values, Width: m.Width, Height: m.Height}}})
		hs = append(hs, []int{3, 2}[i])
		ks = append(ks, len(vk.DAG.Interactions))
	}
	layout, _, err := stark.NewGkrLayout(p.LSkip, hs, ks)
	if err != nil {
		t.Fatal(err)
	}
	r := newRNG(11)
	rf := func() field.Fp4 { return field.Fp4{randFp(r), randFp(r), randFp(r), randFp(r)} }
	alpha, beta := rf(), rf()
	gp, err := Backend{}.NewGkrProver(p, traces, layout, alpha, beta)
	if err != nil {
		t.Fatal(err)
	}
	defer gp.Release()
	if _, err := gp.Round(); !errors.Is(err, ErrGkrProver) {
		t.Fatalf("Round before BeginLayer: %v", err)
	}
	p0, _, err := gp.Root()
	if err != nil || !p0.IsZero() {
		t.Fatalf("root numerator %v (%v)", p0, err)
	}
	L := layout.NumLayers()
	if err := gp.BeginLayer(1, nil, field.Fp4{}); err != nil {
		t.Fatal(err)
	}
	c, err := gp.LayerClaims()
	if err != nil {
		t.Fatal(err)
	}
	mu := rf()
	pHat := c.PXi0.Add(mu.Mul(c.PXi1.Sub(c.PXi0)))
	qHat := c.QXi0.Add(mu.Mul(c.QXi1.Sub(c.QXi0)))
	xi := []field.Fp4{mu}
	for j := 2; j <= L; j++ {
		lambda := rf()
		if err := gp.BeginLayer(j, xi, lambda); err != nil {
			t.Fatal(err)
		}
		if _, err := gp.LayerClaims(); !errors.Is(err, ErrGkrProver) {
			t.Fatalf("LayerClaims before the rounds: %v", err)
		}
		claim := pHat.Add(lambda.Mul(qHat))
		eq := field.Fp4One
		var rho []field.Fp4
		for range j - 1 {
			s, err := gp.Round()
			if err != nil {
				t.Fatal(err)
			}
			// s(0) is implied: check s(0) + s(1) = claim with s(0) from the tree's own cubic.
			rr := rf()
			s0 := claim.Sub(s[0])
			claim = stark.InterpolateCubic0123([4]field.Fp4{s0, s[0], s[1], s[2]}, rr)
			eq = eq.Mul(stark.EqMLE(xi[len(rho):len(rho)+1], []field.Fp4{rr}))
			rho = append(rho, rr)
			if err := gp.Bind(rr); err != nil {
				t.Fatal(err)
			}
		}
		if err := gp.Bind(rf()); !errors.Is(err, ErrGkrProver) {
			t.Fatalf("Bind past the last round: %v", err)
		}
		c, err := gp.LayerClaims()
		if err != nil {
			t.Fatal(err)
		}
		pc := c.PXi0.Mul(c.QXi1).Add(c.PXi1.Mul(c.QXi0))
		qc := c.QXi0.Mul(c.QXi1)
		if want := pc.Add(lambda.Mul(qc)).Mul(eq); want != claim {
			t.Fatalf("layer %d: sumcheck ends at %v, claims give %v", j, claim, want)
		}
		mu := rf()
		pHat = c.PXi0.Add(mu.Mul(c.PXi1.Sub(c.PXi0)))
		qHat = c.QXi0.Add(mu.Mul(c.QXi1.Sub(c.QXi0)))
		xi = append([]field.Fp4{mu}, rho...)
	}
	if err := gp.BeginLayer(L+1, xi, field.Fp4{}); !errors.Is(err, ErrGkrProver) {
		t.Fatalf("BeginLayer past the leaves: %v", err)
	}
}

func TestGkrProverInputErrors(t *testing.T) {
	p := params.TestParamsSmall(2, 8, 2)
	if _, err := (Backend{}).NewGkrProver(p, nil, &stark.GkrLayout{LSkip: 2}, field.Fp4{}, field.Fp4{}); !errors.Is(err, ErrGkrProver) {
		t.Fatalf("empty layout: %v", err)
	}
	layout := &stark.GkrLayout{LSkip: 2, NLogup: 1, Total: 4, Blocks: []stark.GkrBlock{{Trace: 3, LogSize: 2}}}
	if _, err := (Backend{}).NewGkrProver(p, nil, layout, field.Fp4{}, field.Fp4{}); !errors.Is(err, ErrGkrProver) {
		t.Fatalf("block of a missing trace: %v", err)
	}
}
