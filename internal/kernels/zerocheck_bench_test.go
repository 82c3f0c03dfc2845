package kernels

import (
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/metalprove/metalprove/examples/keccakf"
	"github.com/metalprove/metalprove/internal/field"
	"github.com/metalprove/metalprove/internal/field/fieldrand"
	"github.com/metalprove/metalprove/internal/gpu"
)

// BenchmarkZerocheckKernels times each zerocheck kernel (and the sumcheck family's fold) on the
// Keccak-f program over a random trace of 2^ZC_BENCH_LOG_HEIGHT rows (default 12: keccakf-128;
// 15: keccakf-1024), app-100bit geometry (l_skip 4, d 3), on the host device: the best of b.N
// runs of each, one sync per kernel, as milliseconds: coeffs (zc_coeffs alone), round0 (the whole
// of EncodeUniRound: coeffs, zc_uni_eval, sc_sum_rows), bind (EncodeBindUni), fold1 (sc_fold of
// every table after round 1), round1 (EncodeRound of round 1), rounds (of every round):
//
//	ZC_BENCH_LOG_HEIGHT=15 go test ./internal/kernels -run '^$' -bench ZerocheckKernels -benchtime 3x
func BenchmarkZerocheckKernels(b *testing.B) {
	logH := 12
	if v, err := strconv.Atoi(os.Getenv("ZC_BENCH_LOG_HEIGHT")); err == nil {
		logH = v
	}
	pg, _ := compileProgram(b, keccakf.Air{})
	r := rand.New(rand.NewPCG(71, 72))
	const logN, logM, points = 4, 6, 4
	h := 1 << logH
	vals := make([]field.Fp, pg.PartWidths[0]*h)
	for i := range vals {
		vals[i] = field.Fp(r.Uint32N(field.P))
	}
	part, err := gpu.UploadArray(testDev, "bench trace", vals)
	if err != nil {
		b.Fatal(err)
	}
	defer part.Free()
	dom, err := NewZcDomain(testDev, logN, logM)
	if err != nil {
		b.Fatal(err)
	}
	defer dom.Free()
	prog, err := UploadProgram(testDev, "keccakf", pg)
	if err != nil {
		b.Fatal(err)
	}
	defer prog.Free()
	weights := make([]field.Fp4, len(pg.Outputs))
	for o := range weights {
		weights[o] = fieldrand.Fp4(r)
	}
	tr, err := NewZcTrace(testDev, dom, pg, prog, logH, []ZcPart{{Values: part, Width: pg.PartWidths[0]}}, nil, weights, field.Fp4{})
	if err != nil {
		b.Fatal(err)
	}
	defer tr.Free()
	zc, err := NewZerocheck(testDev, dom, points, []*ZcTrace{tr}, ZcOptions{})
	if err != nil {
		b.Fatal(err)
	}
	defer zc.Close()
	x := tr.Blocks()
	eq := make([]field.Fp4, x)
	for i := range eq {
		eq[i] = fieldrand.Fp4(r)
	}
	eqa, err := gpu.UploadArray(testDev, "bench eq", Mont4Slice(eq))
	if err != nil {
		b.Fatal(err)
	}
	defer eqa.Free()
	out, _ := gpu.AllocArray[uint32](testDev, "bench out", zc.UniWidth()+zc.RoundWidth())
	defer out.Free()
	w := make([]field.Fp4, 1<<logN)
	for j := range w {
		w[j] = fieldrand.Fp4(r)
	}
	wa, _ := gpu.UploadArray(testDev, "bench bind weights", ZcBindWeights(w))
	defer wa.Free()
	tabs, _ := gpu.AllocArray[Mont4](testDev, "bench tables", tr.NumTables()*x)
	defer tabs.Free()
	half, _ := gpu.AllocArray[Mont4](testDev, "bench folded", tr.NumTables()*x/2)
	defer half.Free()
	up := zc.uni[tr]

	best := map[string]time.Duration{}
	timeIt := func(name string, enc func(*gpu.Batch) error) {
		enc2 := testDev.Batch()
		start := time.Now()
		if err := enc(enc2); err != nil {
			b.Fatal(err)
		}
		if err := enc2.Wait(); err != nil {
			b.Fatal(err)
		}
		d := time.Since(start)
		if old, ok := best[name]; !ok || d < old {
			best[name] = d
		}
	}
	for range b.N {
		timeIt("coeffs", func(bt *gpu.Batch) error {
			for x0 := 0; x0 < x; x0 += up.sliceBlocks {
				sb := min(up.sliceBlocks, x-x0)
				run := tr.srcRuns[0]
				g, tp := shapeFor(testDev, "zc_coeffs", sb*((run.count+zc.lanes-1)/zc.lanes))
				dispatchZcCoeffs(bt, g, tp, part.Buffer, tr.cols.Buffer, dom.Tw.Buffer, dom.Scale.Buffer, zc.coefs.Buffer, zc.deltas.Buffer,
					zcCoeffsParams{logH: uint32(logH), logN: logN, logM: logM, x0: uint32(x0), sliceBlocks: uint32(sb),
						col0: uint32(run.col0), count: uint32(run.count), ncols: uint32(tr.ncols), lanes: uint32(zc.lanes)})
			}
			return bt.Err()
		})
		timeIt("round0", func(bt *gpu.Batch) error { return zc.EncodeUniRound(bt, tr, eqa, 0, out, 0) })
		timeIt("bind", func(bt *gpu.Batch) error {
			return zc.EncodeBindUni(bt, tr, wa, fieldrand.Fp4(r), fieldrand.Fp4(r), fieldrand.Fp4(r), tabs, x)
		})
		if tr.NLift == 0 {
			continue
		}
		timeIt("fold1", func(bt *gpu.Batch) error {
			return EncodeFold(bt, testDev, tabs, x, half, x/2, tr.NumTables(), tr.NLift-1, fieldrand.Fp4(r))
		})
		timeIt("round1", func(bt *gpu.Batch) error {
			return zc.EncodeRound(bt, tr, tabs, x, tr.NLift, eqa, 0, out, zc.UniWidth())
		})
		timeIt("rounds", func(bt *gpu.Batch) error {
			for lr := tr.NLift; lr >= 1; lr-- {
				if err := zc.EncodeRound(bt, tr, tabs, x, lr, eqa, 0, out, zc.UniWidth()); err != nil {
					return err
				}
			}
			return nil
		})
	}
	for name, d := range best {
		b.ReportMetric(float64(d.Microseconds())/1e3, name+"-ms")
	}
}
