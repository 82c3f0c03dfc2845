package device_test

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/metalprove/metalprove/internal/air"
	"github.com/metalprove/metalprove/internal/backend/cpuref"
	"github.com/metalprove/metalprove/internal/field"
	"github.com/metalprove/metalprove/internal/field/fieldrand"
	"github.com/metalprove/metalprove/internal/gpu"
	"github.com/metalprove/metalprove/internal/params"
	"github.com/metalprove/metalprove/internal/stark"
	"github.com/metalprove/metalprove/internal/stark/device"
	"github.com/metalprove/metalprove/internal/stark/starktest"
	"github.com/metalprove/metalprove/internal/transcript"
)

func openHost(t *testing.T) *gpu.Device {
	t.Helper()
	dev, err := gpu.Open(gpu.KindHost, gpu.Options{HostThreads: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dev.Close() })
	return dev
}

func preset(t *testing.T, name string, logH int) params.SystemParams {
	t.Helper()
	p, _, err := params.Preset(name, logH)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// shape is one trace: log height and width. Shapes are listed in trace order.
type shape struct{ logH, width int }

func randTraces(seed uint64, shapes []shape) []air.Matrix {
	r := rand.New(rand.NewPCG(seed, 7))
	out := make([]air.Matrix, len(shapes))
	for i, s := range shapes {
		t := air.Matrix{Width: s.width, Height: 1 << s.logH, Values: make([]field.Fp, s.width<<s.logH)}
		for j := range t.Values {
			t.Values[j] = fieldrand.Fp(r)
		}
		out[i] = t
	}
	return out
}

var commitCases = []struct {
	name   string
	preset string
	logH   int
	shapes []shape
}{
	// test: l_skip 2, stacked height 2^10, k_whir 3.
	{"test/mixed", "test", 0, []shape{{10, 3}, {9, 1}, {6, 2}, {2, 4}, {1, 2}, {0, 1}}},
	{"test/one-wide", "test", 0, []shape{{10, 9}}},
	{"test/below-lskip-only", "test", 0, []shape{{1, 3}, {0, 2}}},
	{"test/width-0-trace", "test", 0, []shape{{9, 0}, {8, 5}, {3, 0}, {3, 7}}},
	// app-100bit at stacked height 2^11: l_skip 4, k_whir 4.
	{"app11/mixed", "app-100bit", 11, []shape{{11, 5}, {8, 3}, {4, 2}, {3, 1}, {0, 2}}},
	{"app11/full-columns", "app-100bit", 11, []shape{{11, 4}, {10, 2}}},
}

// TestCommitRootsMatchCpuref: the device commitment root equals cpuref's, the commit is two
// syncs (RS encoding, Merkle tree), uploads the stacked matrix once, downloads only the root, and
// falls back for nothing.
func TestCommitRootsMatchCpuref(t *testing.T) {
	dev := openHost(t)
	be := device.New(dev, device.Options{})
	for i, tc := range commitCases {
		t.Run(tc.name, func(t *testing.T) {
			p := preset(t, tc.preset, tc.logH)
			traces := randTraces(uint64(100+i), tc.shapes)
			want, err := cpuref.Backend{}.Commit(p, traces)
			if err != nil {
				t.Fatal(err)
			}
			for rep := range 2 { // the second commit finds the tables and constants uploaded
				dev.ResetStats()
				got, err := be.Commit(p, traces)
				if err != nil {
					t.Fatal(err)
				}
				st := dev.Stats()
				if got.Root() != want.Root() {
					t.Fatalf("root %v, cpuref %v", got.Root(), want.Root())
				}
				if got.Layout().Width != want.Layout().Width {
					t.Fatalf("layout width %d, cpuref %d", got.Layout().Width, want.Layout().Width)
				}
				qBytes := int64(4 * got.Layout().Width << got.Layout().LogHeight)
				if st.Syncs != 2 || st.Downloads != 1 || st.BytesFromDevice != 32 {
					t.Errorf("commit: %d syncs, %d downloads of %d B; want 2 syncs, one 32 B download", st.Syncs, st.Downloads, st.BytesFromDevice)
				}
				if st.PerKernel["ntt_pad_columns"] != 1 || st.PerKernel["merkle_hash_rows"] != 1 {
					t.Errorf("kernels: %v", st.PerKernel)
				}
				if rep == 1 && (st.Uploads != 1 || st.BytesToDevice != qBytes) {
					t.Errorf("second commit: %d uploads of %d B, want the stacked matrix only (%d B)", st.Uploads, st.BytesToDevice, qBytes)
				}
				if rep == 0 {
					t.Logf("first commit: %d dispatches, %d syncs, %d uploads (%d B), %d downloads (%d B), peak %d B",
						st.Dispatches, st.Syncs, st.Uploads, st.BytesToDevice, st.Downloads, st.BytesFromDevice, st.MemoryPeak)
				}
				got.(*device.Committed).Free()
			}
		})
	}
	if fb := be.Fallbacks(); len(fb) != 0 {
		t.Errorf("commits fell back: %v", fb)
	}
	if n, _ := be.HostCopies(); n != 0 {
		t.Errorf("%d host copies for commits alone", n)
	}
	be.Close()
	if live := dev.LiveBuffers(); len(live) != 0 {
		t.Errorf("buffers left after Close: %v", live)
	}
}

func TestCommitErrors(t *testing.T) {
	dev := openHost(t)
	be := device.New(dev, device.Options{})
	defer be.Close()
	p := preset(t, "test", 0)
	if _, err := be.Commit(p, randTraces(1, []shape{{5, 0}, {3, 0}})); !errors.Is(err, cpuref.ErrStackedWidthZero) {
		t.Errorf("width 0: %v", err)
	}
	bad := randTraces(1, []shape{{3, 2}})
	bad[0].Height, bad[0].Width = 6, 1
	bad[0].Values = bad[0].Values[:6]
	if _, err := be.Commit(p, bad); err == nil {
		t.Error("height 6 accepted")
	}
	if _, err := be.Commit(p, randTraces(1, []shape{{3, 2}, {5, 1}})); err == nil {
		t.Error("traces out of trace order accepted")
	}
	if _, err := be.Commit(p, randTraces(1, []shape{{11, 1}})); err == nil {
		t.Error("trace taller than the stacked height accepted")
	}
	// Foreign and freed handles.
	ref, err := cpuref.Backend{}.Commit(p, randTraces(2, []shape{{4, 2}}))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := be.NewWhirProver(p, []stark.Committed{ref}, field.Fp4One, make([]field.Fp4, p.LSkip+p.NStack)); !errors.Is(err, device.ErrForeignHandle) {
		t.Errorf("cpuref handle: %v", err)
	}
	c, err := be.Commit(p, randTraces(2, []shape{{4, 2}}))
	if err != nil {
		t.Fatal(err)
	}
	c.(*device.Committed).Free()
	if _, err := be.NewWhirProver(p, []stark.Committed{c}, field.Fp4One, make([]field.Fp4, p.LSkip+p.NStack)); !errors.Is(err, device.ErrCommitFreed) {
		t.Errorf("freed handle: %v", err)
	}
}

// claimsFor returns the true opening claims of the commitment groups at a random point.
func claimsFor(p params.SystemParams, seed uint64, groups [][]air.Matrix) *stark.OpeningClaims {
	r := rand.New(rand.NewPCG(seed, 11))
	maxN := 0
	for _, g := range groups {
		for _, m := range g {
			if m.Width > 0 {
				h := 0
				for 1<<h < m.Height {
					h++
				}
				maxN = max(maxN, h-p.LSkip)
			}
		}
	}
	claims := &stark.OpeningClaims{R: make([]field.Fp4, maxN+1)}
	for i := range claims.R {
		claims.R[i] = fieldrand.Fp4(r)
	}
	for _, g := range groups {
		var cc stark.CommitClaims
		for _, m := range g {
			need := r.IntN(2) == 0
			vals := make([]field.Fp4, m.Width)
			rots := make([]field.Fp4, m.Width)
			for j := range m.Width {
				vals[j] = starktest.EvalColumn(p.LSkip, starktest.Column(m, j), claims.R)
				if need {
					rots[j] = starktest.EvalColumn(p.LSkip, starktest.Rotate(starktest.Column(m, j)), claims.R)
				}
			}
			cc.NeedRot = append(cc.NeedRot, need)
			cc.Values = append(cc.Values, vals)
			cc.Rot = append(cc.Rot, rots)
		}
		claims.Commits = append(claims.Commits, cc)
	}
	return claims
}

func startTranscript() transcript.Transcript {
	tr := transcript.New()
	for i := range 5 {
		tr.Observe(field.Fp(31 + i))
	}
	return tr
}

func encode(t *testing.T, sp *stark.StackingProof, wp *stark.WhirProof) ([]byte, []byte) {
	t.Helper()
	sb, err := stark.EncodeStackingProof(sp)
	if err != nil {
		t.Fatal(err)
	}
	wb, err := stark.EncodeWhirProof(wp)
	if err != nil {
		t.Fatal(err)
	}
	return sb, wb
}

// TestProveOpeningsParity: stark.ProveOpenings on the device backend gives byte-identical proofs
// to cpuref and verifies; the fallbacks are exactly the stacking and WHIR provers (never Commit
// or OpenInitial), each logged once; the stacked matrices are downloaded once per commitment;
// OpenInitial syncs once per opening and downloads only the opened rows and paths.
func TestProveOpeningsParity(t *testing.T) {
	cases := []struct {
		name   string
		preset string
		logH   int
		groups [][]shape // commitments: common main (mixed heights), cached, preprocessed
	}{
		{"test", "test", 0, [][]shape{{{10, 2}, {9, 0}, {8, 3}, {5, 1}, {2, 2}, {1, 1}, {0, 2}}, {{9, 2}}, {{1, 1}}}},
		{"app11", "app-100bit", 11, [][]shape{{{11, 3}, {10, 0}, {9, 2}, {6, 1}, {4, 3}, {3, 2}, {0, 1}}, {{10, 2}}, {{3, 1}}}},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := preset(t, tc.preset, tc.logH)
			dev := openHost(t)
			var logBuf bytes.Buffer
			log := zerolog.New(&logBuf)
			be := device.New(dev, device.Options{Logger: &log})
			defer be.Close()

			groups := make([][]air.Matrix, len(tc.groups))
			var refCommits, devCommits []stark.Committed
			var roots []stark.Digest
			var layouts []*stark.StackedLayout
			var qBytes int64
			for g, shapes := range tc.groups {
				groups[g] = randTraces(uint64(1000*i+g), shapes)
				rc, err := cpuref.Backend{}.Commit(p, groups[g])
				if err != nil {
					t.Fatal(err)
				}
				dc, err := be.Commit(p, groups[g])
				if err != nil {
					t.Fatal(err)
				}
				if dc.Root() != rc.Root() {
					t.Fatalf("commitment %d: root differs from cpuref", g)
				}
				refCommits = append(refCommits, rc)
				devCommits = append(devCommits, dc)
				roots = append(roots, dc.Root())
				layouts = append(layouts, dc.Layout())
				qBytes += int64(4 * dc.Layout().Width << dc.Layout().LogHeight)
			}
			claims := claimsFor(p, uint64(i), groups)

			tr := startTranscript()
			rsp, rwp, err := stark.ProveOpenings(cpuref.Backend{}, &tr, p, refCommits, claims)
			if err != nil {
				t.Fatal(err)
			}
			dev.ResetStats()
			trd := startTranscript()
			dsp, dwp, err := stark.ProveOpenings(be, &trd, p, devCommits, claims)
			if err != nil {
				t.Fatal(err)
			}
			st := dev.Stats()
			if trd != tr {
				t.Error("prover transcripts differ")
			}
			rs, rw := encode(t, &rsp, &rwp)
			ds, dw := encode(t, &dsp, &dwp)
			if !bytes.Equal(rs, ds) {
				t.Error("StackingProof bytes differ from cpuref")
			}
			if !bytes.Equal(rw, dw) {
				t.Error("WhirProof bytes differ from cpuref")
			}
			vtr := startTranscript()
			if err := stark.VerifyOpenings(&vtr, p, roots, layouts, claims, &dsp, &dwp); err != nil {
				t.Fatalf("verify: %v", err)
			}

			// Fallbacks: the provers, never Commit or the initial openings.
			fb := be.Fallbacks()
			R, k := len(p.Whir.Rounds), p.Whir.K
			want := map[string]int{
				"NewStackingProver": 1, "StackingProver.UnivariateRound": 1, "StackingProver.BindUnivariate": 1,
				"StackingProver.Openings": 1, "NewWhirProver": 1,
				"WhirProver.SumcheckRound": R * k, "WhirProver.Fold": R * k, "WhirProver.FinalPoly": 1,
			}
			for op, n := range want {
				if fb[op] != n {
					t.Errorf("fallback %s: %d calls, want %d (all: %v)", op, fb[op], n, fb)
				}
			}
			for _, op := range []string{"Commit", "OpenInitial", "WhirProver.OpenInitial"} {
				if fb[op] != 0 {
					t.Errorf("%s fell back", op)
				}
			}
			if fb["StackingProver.Round"] == 0 || fb["StackingProver.Round"] != fb["StackingProver.Bind"] {
				t.Errorf("stacking rounds: %v", fb)
			}
			logs := logBuf.String()
			for _, op := range be.FallbackOps() {
				if n := strings.Count(logs, `"op":"`+op+`"`); n != 1 {
					t.Errorf("fallback %s logged %d times, want once", op, n)
				}
			}

			// Transfers: one host copy of each stacked matrix, then only the opened rows and
			// Merkle paths of the initial commitments (one gather sync per opening).
			nc, hb := be.HostCopies()
			if nc != len(devCommits) || hb != qBytes {
				t.Errorf("host copies: %d commitments, %d B; want %d, %d B", nc, hb, len(devCommits), qBytes)
			}
			var openedBytes int64
			openings := 0
			for c := range dwp.InitialRoundOpenedRows {
				for q, rows := range dwp.InitialRoundOpenedRows[c] {
					openings++
					for _, row := range rows {
						openedBytes += int64(4 * len(row))
					}
					openedBytes += int64(32 * len(dwp.InitialRoundMerkleProofs[c][q]))
				}
			}
			if st.BytesFromDevice != qBytes+openedBytes {
				t.Errorf("downloaded %d B during the proof, want %d (stacked matrices) + %d (openings)", st.BytesFromDevice, qBytes, openedBytes)
			}
			if st.Syncs != openings || st.PerKernel["merkle_gather_rows"] != openings || st.Dispatches != openings {
				t.Errorf("%d syncs, %d dispatches (%v) for %d openings", st.Syncs, st.Dispatches, st.PerKernel, openings)
			}
			t.Logf("%d fallback calls over %d ops; host copies %d B; openings %d (%d B)", be.FallbackCalls(), len(fb), hb, openings, openedBytes)
		})
	}
}
