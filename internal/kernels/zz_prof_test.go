package kernels

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/metalprove/metalprove/examples/keccakf"
	"github.com/metalprove/metalprove/internal/field"
	"github.com/metalprove/metalprove/internal/field/fieldrand"
)

func TestZZProf(t *testing.T) {
	pg, _ := compileProgram(t, keccakf.Air{})
	r := rand.New(rand.NewPCG(1, 2))
	ref := newZcRef(r, pg, 4, 12)
	for _, pm := range []bool{false, true} {
		dv := newZcDevice(t, ref, 6, 4, ZcOptions{PointMode: pm})
		x := 1 << ref.nLift
		e := make([]field.Fp4, x)
		for i := range e {
			e[i] = fieldrand.Fp4(r)
		}
		eq := uploadWords(t, "eq", MontFp4Slice(e))
		out := allocWords(t, dv.zc.UniWidth())
		up := dv.zc.uni[dv.trace]
		t.Logf("plan %+v", up)
		for rep := 0; rep < 2; rep++ {
			// coeffs only
			b := testDev.Batch()
			start := time.Now()
			for q, part := range dv.trace.Parts {
				run := dv.trace.srcRuns[q]
				items := x * ((run.count + 15) / 16)
				g, tp := shapeFor(testDev, "zc_coeffs", items)
				dispatchZcCoeffs(b, g, tp, part.Values.Buffer, dv.trace.cols.Buffer, dv.dom.Tw.Buffer, dv.zc.coefs.Buffer, dv.zc.deltas.Buffer,
					zcCoeffsParams{logH: 12, logN: 4, logM: 6, x0: 0, sliceBlocks: uint32(x), col0: uint32(run.col0), count: uint32(run.count), ncols: uint32(dv.trace.ncols), invN: 1, lanes: 16})
			}
			b.Wait()
			t1 := time.Now()
			b = testDev.Batch()
			if err := dv.zc.EncodeUniRound(b, dv.trace, eq, 0, out, 0); err != nil {
				t.Fatal(err)
			}
			b.Wait()
			t2 := time.Now()
			t.Logf("point mode %v: coeffs %v, whole round 0 %v", pm, t1.Sub(start), t2.Sub(t1))
		}
	}
}
