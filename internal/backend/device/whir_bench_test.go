package device_test

import (
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/metalprove/metalprove/internal/air"
	"github.com/metalprove/metalprove/internal/backend/cpuref"
	"github.com/metalprove/metalprove/internal/backend/device"
	"github.com/metalprove/metalprove/internal/field"
	"github.com/metalprove/metalprove/internal/field/fieldrand"
	"github.com/metalprove/metalprove/internal/gpu"
	"github.com/metalprove/metalprove/internal/params"
	"github.com/metalprove/metalprove/internal/stark"
)

// BenchmarkWhirProver runs the WHIR prover calls of one proof (ProveWhir's sequence, random
// challenges) on a stacked matrix of 2^h × width (app-100bit at log stacked height h), on the
// host device and on cpuref, and reports the milliseconds spent in each kind of call per proof.
// h and width come from WHIR_BENCH_LOG_HEIGHT (default 16) and WHIR_BENCH_WIDTH (default 42);
// keccakf-1024's shape is h = 21, width 42:
//
//	WHIR_BENCH_LOG_HEIGHT=21 go test ./internal/backend/device -run '^$' -bench WhirProver -benchtime 1x
func BenchmarkWhirProver(b *testing.B) {
	h := envInt("WHIR_BENCH_LOG_HEIGHT", 16)
	width := envInt("WHIR_BENCH_WIDTH", 42)
	p, err := params.AppParams(h)
	if err != nil {
		b.Fatal(err)
	}
	r := rand.New(rand.NewPCG(51, 52))
	m := air.NewMatrix(width, 1<<h)
	copy(m.Values, fieldrand.Fps(r, len(m.Values)))
	mu := fieldrand.Fp4(r)
	uCube := make([]field.Fp4, h)
	for i := range uCube {
		uCube[i] = fieldrand.Fp4(r)
	}
	b.Run(fmt.Sprintf("host/2^%dx%d", h, width), func(b *testing.B) {
		dev, err := gpu.Open(gpu.KindHost, gpu.Options{})
		if err != nil {
			b.Fatal(err)
		}
		defer dev.Close()
		be, err := device.New(dev, device.Options{})
		if err != nil {
			b.Fatal(err)
		}
		defer be.Close()
		tr, err := be.LoadTrace("bench", &m)
		if err != nil {
			b.Fatal(err)
		}
		c, err := be.Commit(p, []stark.Trace{tr})
		if err != nil {
			b.Fatal(err)
		}
		benchWhir(b, p, func() (stark.WhirProver, error) { return be.NewWhirProver(p, []stark.Committed{c}, mu, uCube) })
	})
	b.Run(fmt.Sprintf("cpuref/2^%dx%d", h, width), func(b *testing.B) {
		c, err := cpuref.CommitMatrices(p, []air.Matrix{m})
		if err != nil {
			b.Fatal(err)
		}
		benchWhir(b, p, func() (stark.WhirProver, error) {
			return cpuref.Backend{}.NewWhirProver(p, []stark.Committed{c}, mu, uCube)
		})
	})
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil {
		return v
	}
	return def
}

// benchWhir times each kind of prover call over b.N proofs' sequences and reports ms per proof.
func benchWhir(b *testing.B, p params.SystemParams, newProver func() (stark.WhirProver, error)) {
	times := map[string]time.Duration{}
	timed := func(name string, f func() error) {
		t0 := time.Now()
		if err := f(); err != nil {
			b.Fatalf("%s: %v", name, err)
		}
		times[name] += time.Since(t0)
	}
	r := rand.New(rand.NewPCG(53, 54))
	k := p.Whir.K
	b.ResetTimer()
	for range b.N {
		var wp stark.WhirProver
		timed("new", func() (err error) { wp, err = newProver(); return err })
		lrs := p.LSkip + p.NStack + p.LogBlowup
		for round, rc := range p.Whir.Rounds {
			last := round == len(p.Whir.Rounds)-1
			for range k {
				timed("sumcheck", func() error { _, _, err := wp.SumcheckRound(); return err })
				timed("fold", func() error { return wp.Fold(fieldrand.Fp4(r)) })
			}
			z0 := fieldrand.Fp4(r)
			if !last {
				timed("commit", func() error { _, err := wp.CommitFolded(lrs - 1); return err })
				timed("eval", func() error { _, err := wp.EvalFolded(z0); return err })
			} else {
				timed("final", func() error { _, err := wp.FinalPoly(); return err })
			}
			qbits := lrs - k
			idx := make([]int, rc.NumQueries)
			for q := range idx {
				idx[q] = r.IntN(1 << qbits)
			}
			if round == 0 {
				timed("open", func() error { _, err := wp.OpenInitial(idx); return err })
			} else {
				timed("open", func() error { _, err := wp.OpenCodeword(round-1, idx); return err })
			}
			if !last {
				coefs := make([]field.Fp4, len(idx)+1)
				points := make([]field.Fp4, len(idx)+1)
				points[0] = z0
				omega := field.TwoAdicGenerator(qbits)
				for i := range coefs {
					coefs[i] = fieldrand.Fp4(r)
					if i > 0 {
						points[i] = field.Lift(omega.Exp(uint64(idx[i-1])))
					}
				}
				timed("weight", func() error { return wp.AccumulateWeight(coefs, points) })
			}
			lrs--
		}
		timed("release", func() error { wp.Release(); return nil })
	}
	for name, d := range times {
		b.ReportMetric(float64(d.Milliseconds())/float64(b.N), name+"-ms")
	}
}
