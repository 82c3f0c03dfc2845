package stark

import (
	"context"
	"errors"
	"fmt"

	"github.com/metalprove/metalprove/internal/field"
	"github.com/metalprove/metalprove/internal/params"
	"github.com/metalprove/metalprove/internal/poseidon2"
	"github.com/metalprove/metalprove/internal/transcript"
)

// WHIR opening proof (spec A §6; OpenVM prover/whir.rs::prove_whir_opening,
// verifier/whir.rs::verify_whir).

// checkWhirParams rejects parameter sets the protocol does not support (R = 0, too many
// sumcheck rounds, query index widths beyond sample_bits).
func checkWhirParams(p params.SystemParams) error {
	m := p.LSkip + p.NStack
	k, rounds := p.Whir.K, len(p.Whir.Rounds)
	if p.LSkip < 0 || p.NStack < 0 || p.LogBlowup < 0 || m+p.LogBlowup > field.TwoAdicity {
		return fmt.Errorf("%w: l_skip=%d n_stack=%d log_blowup=%d", ErrOpeningInput, p.LSkip, p.NStack, p.LogBlowup)
	}
	if k < 1 || rounds < 1 || k*rounds > m || m+p.LogBlowup-k < 0 {
		return fmt.Errorf("%w: WHIR k=%d with %d rounds for m=%d", ErrOpeningInput, k, rounds, m)
	}
	for _, b := range []int{p.Whir.MuPowBits, p.Whir.FoldingPowBits, p.Whir.QueryPhasePowBits} {
		if b < 0 || b > transcript.MaxBits {
			return fmt.Errorf("%w: PoW bits %d", ErrOpeningInput, b)
		}
	}
	for _, rc := range p.Whir.Rounds {
		if rc.NumQueries < 0 {
			return fmt.Errorf("%w: negative query count", ErrOpeningInput)
		}
	}
	return nil
}

// ProveWhir runs the WHIR prover (spec A §6.3) for the stacked columns of commits (commitment
// list order) at uCube = (u_0, u_0^2, …, u_0^(2^(l_skip−1)), u_1, …). The transcript must already
// have observed the stacking openings.
func ProveWhir(be WhirBackend, g transcript.Grinder, tr *transcript.Transcript, p params.SystemParams, commits []Committed, uCube []field.Fp4) (WhirProof, error) {
	if err := checkWhirParams(p); err != nil {
		return WhirProof{}, err
	}
	m := p.LSkip + p.NStack
	if len(commits) == 0 || len(uCube) != m {
		return WhirProof{}, fmt.Errorf("%w: %d commitments, point of length %d (want %d)", ErrOpeningInput, len(commits), len(uCube), m)
	}
	k, R := p.Whir.K, len(p.Whir.Rounds)
	var proof WhirProof
	grind := func(bits int) (field.Fp, error) { return tr.GrindWith(context.Background(), g, bits) }
	wp, chain, err := openWhir(be, grind, tr, p, commits, uCube, &proof)
	if err != nil {
		return WhirProof{}, err
	}
	defer wp.Release()

	proof.InitialRoundOpenedRows = make([][][][]field.Fp, len(commits))
	proof.InitialRoundMerkleProofs = make([][][]Digest, len(commits))
	lrs := m + p.LogBlowup
	dr, onDevice := wp.(WhirDeviceRounds)
	for r, rc := range p.Whir.Rounds {
		last := r == R-1
		// A backend that runs the round's sumcheck rounds with the transcript on the device
		// returns them at once; the loop replays them through tr, checking each witness and
		// bound value.
		var devPolys [][2]field.Fp4
		var devW []field.Fp
		var devAlpha []field.Fp4
		var cr *WhirChainRound      // the round as the chain ran it (nil for the last)
		var final *WhirFinalQueries // the last round's query phase as the device ran it
		useDev := false
		switch {
		case chain != nil && !last:
			cr = &chain.Rounds[r]
			devPolys, devW, devAlpha, useDev = cr.Polys, cr.Witnesses, cr.Alphas, true
		case chain != nil:
			devPolys, devW, devAlpha, useDev = chain.LastPolys, chain.LastWitnesses, chain.LastAlphas, true
		case onDevice:
			devPolys, devW, devAlpha, err = dr.SumcheckRounds(tr, k, p.Whir.FoldingPowBits)
			switch {
			case errors.Is(err, ErrDeviceRoundsUnsupported):
				onDevice = false
			case err != nil:
				return WhirProof{}, err
			case len(devPolys) != k || len(devW) != k || len(devAlpha) != k:
				return WhirProof{}, fmt.Errorf("%w: WHIR round %d: %d sums, %d witnesses and %d bound values from the device, want %d", ErrDeviceTranscript, r, len(devPolys), len(devW), len(devAlpha), k)
			}
			useDev = onDevice
		}
		for i := range k {
			var s1, s2 field.Fp4
			if useDev {
				s1, s2 = devPolys[i][0], devPolys[i][1]
			} else if s1, s2, err = wp.SumcheckRound(); err != nil {
				return WhirProof{}, err
			}
			tr.ObserveExt(s1)
			tr.ObserveExt(s2)
			proof.WhirSumcheckPolys = append(proof.WhirSumcheckPolys, [2]field.Fp4{s1, s2})
			var w field.Fp
			if useDev {
				w = devW[i]
				if !tr.CheckWitness(p.Whir.FoldingPowBits, w) {
					return WhirProof{}, fmt.Errorf("%w: WHIR round %d, sumcheck round %d: the device's witness %d fails the proof of work", ErrDeviceTranscript, r, i, w)
				}
			} else if w, err = grind(p.Whir.FoldingPowBits); err != nil {
				return WhirProof{}, err
			}
			proof.FoldingPowWitnesses = append(proof.FoldingPowWitnesses, w)
			alpha := tr.SampleExt()
			if useDev {
				if devAlpha[i] != alpha {
					return WhirProof{}, fmt.Errorf("%w: WHIR round %d, sumcheck round %d: bound value %v on the device, %v here", ErrDeviceTranscript, r, i, devAlpha[i], alpha)
				}
			} else if err := wp.Fold(alpha); err != nil {
				return WhirProof{}, err
			}
		}
		var z0 field.Fp4
		var w field.Fp
		switch dc, ok := wp.(WhirDeviceCommit); {
		case cr != nil:
			tr.ObserveDigest(cr.Root)
			proof.CodewordCommits = append(proof.CodewordCommits, cr.Root)
			if z0 = tr.SampleExt(); z0 != cr.Z {
				return WhirProof{}, fmt.Errorf("%w: WHIR round %d's out-of-domain point: %v on the device, %v here", ErrDeviceTranscript, r, cr.Z, z0)
			}
			tr.ObserveExt(cr.Y)
			proof.OODValues = append(proof.OODValues, cr.Y)
			if !tr.CheckWitness(p.Whir.QueryPhasePowBits, cr.QueryWitness) {
				return WhirProof{}, fmt.Errorf("%w: WHIR round %d: the device's query-phase witness %d fails the proof of work", ErrDeviceTranscript, r, cr.QueryWitness)
			}
			w = cr.QueryWitness
		case !last && ok:
			// The commitment and the transcript's steps up to the query-phase witness on the
			// device, replayed here.
			root, zd, y0, wd, err := dc.CommitRound(tr, lrs-1, p.Whir.QueryPhasePowBits)
			if err != nil {
				return WhirProof{}, err
			}
			tr.ObserveDigest(root)
			proof.CodewordCommits = append(proof.CodewordCommits, root)
			if z0 = tr.SampleExt(); z0 != zd {
				return WhirProof{}, fmt.Errorf("%w: WHIR round %d's out-of-domain point: %v on the device, %v here", ErrDeviceTranscript, r, zd, z0)
			}
			tr.ObserveExt(y0)
			proof.OODValues = append(proof.OODValues, y0)
			if !tr.CheckWitness(p.Whir.QueryPhasePowBits, wd) {
				return WhirProof{}, fmt.Errorf("%w: WHIR round %d: the device's query-phase witness %d fails the proof of work", ErrDeviceTranscript, r, wd)
			}
			w = wd
		case !last:
			root, err := wp.CommitFolded(lrs - 1)
			if err != nil {
				return WhirProof{}, err
			}
			tr.ObserveDigest(root)
			proof.CodewordCommits = append(proof.CodewordCommits, root)
			z0 = tr.SampleExt()
			y0, err := wp.EvalFolded(z0)
			if err != nil {
				return WhirProof{}, err
			}
			tr.ObserveExt(y0)
			proof.OODValues = append(proof.OODValues, y0)
			if w, err = grind(p.Whir.QueryPhasePowBits); err != nil {
				return WhirProof{}, err
			}
		default:
			// A chain whose device ran the query phase already (from the final polynomial it
			// read) brings the polynomial; otherwise it is read now.
			behind := chain != nil && chain.Final != nil
			var fp []field.Fp4
			if behind {
				fp = chain.FinalPoly
			} else if fp, err = wp.FinalPoly(); err != nil {
				return WhirProof{}, err
			}
			tr.ObserveSlice(flattenExt(fp)) // as ObserveExt of each, in one absorb (2^d of them)
			proof.FinalPoly = fp
			fq, onDevice := wp.(WhirDeviceFinal)
			switch {
			case behind:
				final, err = chain.Final.Wait()
			case onDevice && r > 0:
				if final, err = fq.FinalQueries(tr, p); errors.Is(err, ErrDeviceRoundsUnsupported) {
					final, err = nil, nil
				}
			}
			switch {
			case err != nil:
				return WhirProof{}, err
			case final != nil && (len(final.QueryIndices) != rc.NumQueries || len(final.Codeword) != rc.NumQueries):
				return WhirProof{}, fmt.Errorf("%w: WHIR's last round: %d query indices and %d openings from the device, want %d", ErrDeviceTranscript, len(final.QueryIndices), len(final.Codeword), rc.NumQueries)
			}
			if final != nil {
				if w = final.Witness; !tr.CheckWitness(p.Whir.QueryPhasePowBits, w) {
					return WhirProof{}, fmt.Errorf("%w: WHIR's last round: the device's query-phase witness %d fails the proof of work", ErrDeviceTranscript, w)
				}
			} else if w, err = grind(p.Whir.QueryPhasePowBits); err != nil {
				return WhirProof{}, err
			}
		}
		proof.QueryPhasePowWitnesses = append(proof.QueryPhasePowWitnesses, w)
		// The indices and γ the device sampled, compared with the stage's (a chained round's or
		// the last round's query phase on the device).
		var devIdx []int
		var devGamma field.Fp4
		switch {
		case cr != nil:
			devIdx, devGamma = cr.QueryIndices, cr.Gamma
		case final != nil:
			devIdx, devGamma = final.QueryIndices, final.Gamma
		}
		qbits := lrs - k
		idx := make([]int, rc.NumQueries)
		for q := range idx {
			idx[q] = int(tr.SampleBits(qbits))
			if devIdx != nil && devIdx[q] != idx[q] {
				return WhirProof{}, fmt.Errorf("%w: WHIR round %d's query %d: index %d on the device, %d here", ErrDeviceTranscript, r, q, devIdx[q], idx[q])
			}
		}
		// γ right after the indices (the openings do not enter the transcript), and the next
		// round's weights given to the backend before the openings: the device works on them
		// while the host gathers the opened rows. A chained round's are on the device already.
		gamma := tr.SampleExt()
		if devIdx != nil && devGamma != gamma {
			return WhirProof{}, fmt.Errorf("%w: WHIR round %d's γ: %v on the device, %v here", ErrDeviceTranscript, r, devGamma, gamma)
		}
		if !last && cr == nil {
			omega := field.TwoAdicGenerator(qbits)
			coefs := make([]field.Fp4, 0, len(idx)+1)
			points := make([]field.Fp4, 0, len(idx)+1)
			coefs = append(coefs, gamma)
			points = append(points, z0)
			gp := gamma
			for _, y := range idx {
				gp = gp.Mul(gamma)
				coefs = append(coefs, gp)
				points = append(points, field.Lift(omega.Exp(uint64(y))))
			}
			if err := wp.AccumulateWeight(coefs, points); err != nil {
				return WhirProof{}, err
			}
		}
		if r == 0 {
			ops := cr.initial()
			if cr == nil {
				if ops, err = wp.OpenInitial(idx); err != nil {
					return WhirProof{}, err
				}
			}
			if len(ops) != len(idx) {
				return WhirProof{}, fmt.Errorf("%w: backend answered %d of %d queries", ErrOpeningInput, len(ops), len(idx))
			}
			for _, o := range ops {
				if len(o.Rows) != len(commits) || len(o.Paths) != len(commits) {
					return WhirProof{}, fmt.Errorf("%w: backend opened %d commitments", ErrOpeningInput, len(o.Rows))
				}
				for c := range commits {
					proof.InitialRoundOpenedRows[c] = append(proof.InitialRoundOpenedRows[c], o.Rows[c])
					proof.InitialRoundMerkleProofs[c] = append(proof.InitialRoundMerkleProofs[c], o.Paths[c])
				}
			}
		} else {
			ops := cr.codeword()
			if final != nil {
				ops = final.Codeword
			} else if cr == nil {
				if ops, err = wp.OpenCodeword(r-1, idx); err != nil {
					return WhirProof{}, err
				}
			}
			if len(ops) != len(idx) {
				return WhirProof{}, fmt.Errorf("%w: backend answered %d of %d queries", ErrOpeningInput, len(ops), len(idx))
			}
			vals := make([][]field.Fp4, len(ops))
			paths := make([][]Digest, len(ops))
			for q, o := range ops {
				vals[q], paths[q] = o.Values, o.Path
			}
			proof.CodewordOpenedValues = append(proof.CodewordOpenedValues, vals)
			proof.CodewordMerkleProofs = append(proof.CodewordMerkleProofs, paths)
		}
		lrs--
	}
	return proof, nil
}

// openWhir makes the WHIR prover and, where it runs the rounds as one chain on its device
// (WhirDeviceChain), that chain's run, with μ replayed: μ made here (its proof-of-work witness
// into proof) and given to NewWhirProver, or made on the device (WhirDeviceMu) and checked
// against the chain's run. The run's rounds are replayed by ProveWhir's loop, each witness and
// sample checked (ErrDeviceTranscript). chain is nil where the rounds run one by one.
func openWhir(be WhirBackend, grind func(int) (field.Fp, error), tr *transcript.Transcript, p params.SystemParams, commits []Committed, uCube []field.Fp4, proof *WhirProof) (wp WhirProver, chain *WhirChainRun, err error) {
	muOnDevice := false
	if db, ok := be.(WhirDeviceMu); ok {
		switch wp, err = db.NewWhirProverMu(p, commits, tr, uCube); {
		case errors.Is(err, ErrDeviceRoundsUnsupported):
			wp = nil
		case err != nil:
			return nil, nil, err
		default:
			muOnDevice = true
		}
	}
	if wp == nil {
		if proof.MuPowWitness, err = grind(p.Whir.MuPowBits); err != nil {
			return nil, nil, err
		}
		mu := tr.SampleExt()
		if wp, err = be.NewWhirProver(p, commits, mu, uCube); err != nil {
			return nil, nil, err
		}
	}
	fail := func(err error) (WhirProver, *WhirChainRun, error) {
		wp.Release()
		return nil, nil, err
	}
	if ch, ok := wp.(WhirDeviceChain); ok {
		switch chain, err = ch.ChainRounds(tr, p); {
		case errors.Is(err, ErrDeviceRoundsUnsupported):
			chain = nil
		case err != nil:
			return fail(err)
		default:
			if err := checkChainRun(chain, p, len(commits)); err != nil {
				return fail(err)
			}
		}
	}
	switch {
	case muOnDevice && (chain == nil || !chain.MuOnDevice):
		return fail(fmt.Errorf("%w: WHIR's μ was made on the device but its rounds did not run there", ErrDeviceTranscript))
	case muOnDevice:
		if !tr.CheckWitness(p.Whir.MuPowBits, chain.MuWitness) {
			return fail(fmt.Errorf("%w: the device's μ witness %d fails the proof of work", ErrDeviceTranscript, chain.MuWitness))
		}
		proof.MuPowWitness = chain.MuWitness
		if mu := tr.SampleExt(); mu != chain.Mu {
			return fail(fmt.Errorf("%w: μ %v on the device, %v here", ErrDeviceTranscript, chain.Mu, mu))
		}
	case chain != nil && chain.MuOnDevice:
		return fail(fmt.Errorf("%w: a chain with μ from a prover given μ", ErrDeviceTranscript))
	}
	return wp, chain, nil
}

// initial and codeword are a chained round's openings (nil for no chained round).
func (cr *WhirChainRound) initial() []InitialOpening {
	if cr == nil {
		return nil
	}
	return cr.Initial
}

func (cr *WhirChainRound) codeword() []CodewordOpening {
	if cr == nil {
		return nil
	}
	return cr.Codeword
}

// checkChainRun checks a WhirChainRun's shape against the parameters: R − 1 rounds of k
// sumcheck rounds each, their query counts and openings (every commitment's in round 0), and the
// last round's k sumcheck rounds.
func checkChainRun(run *WhirChainRun, p params.SystemParams, commits int) error {
	k, R := p.Whir.K, len(p.Whir.Rounds)
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: WHIR's rounds from the device: %s", ErrDeviceTranscript, fmt.Sprintf(format, a...))
	}
	if len(run.Rounds) != R-1 {
		return bad("%d rounds, want %d", len(run.Rounds), R-1)
	}
	if len(run.LastPolys) != k || len(run.LastWitnesses) != k || len(run.LastAlphas) != k {
		return bad("the last round's %d sums, %d witnesses and %d bound values, want %d", len(run.LastPolys), len(run.LastWitnesses), len(run.LastAlphas), k)
	}
	if n := 1 << max(p.LogFinalPolyLen(), 0); run.Final != nil && len(run.FinalPoly) != n {
		return bad("a final polynomial of %d coefficients, want %d", len(run.FinalPoly), n)
	} else if run.Final == nil && run.FinalPoly != nil {
		return bad("a final polynomial without the last round's query phase")
	}
	for r, cr := range run.Rounds {
		n := p.Whir.Rounds[r].NumQueries
		switch {
		case len(cr.Polys) != k || len(cr.Witnesses) != k || len(cr.Alphas) != k:
			return bad("round %d: %d sums, %d witnesses and %d bound values, want %d", r, len(cr.Polys), len(cr.Witnesses), len(cr.Alphas), k)
		case len(cr.QueryIndices) != n:
			return bad("round %d: %d query indices, want %d", r, len(cr.QueryIndices), n)
		case r == 0 && (len(cr.Initial) != n || len(cr.Codeword) != 0):
			return bad("round 0: %d initial openings and %d codeword openings, want %d and 0", len(cr.Initial), len(cr.Codeword), n)
		case r > 0 && (len(cr.Codeword) != n || len(cr.Initial) != 0):
			return bad("round %d: %d codeword openings and %d initial openings, want %d and 0", r, len(cr.Codeword), len(cr.Initial), n)
		}
		for q, o := range cr.Initial {
			if len(o.Rows) != commits || len(o.Paths) != commits {
				return bad("round 0, query %d: openings of %d commitments, want %d", q, len(o.Rows), commits)
			}
		}
	}
	return nil
}

// MerkleRoot recomputes the Merkle root from an opened query group and its sibling path
// (verifier/whir.rs merkle_verify): the leaf is tree_compress(hash_slice(rows[0]), …,
// hash_slice(rows[G−1])), then per sibling s cur = idx even ? compress(cur, s) : compress(s, cur),
// idx >>= 1. Like the Rust verifier it does not check idx < 2^len(path). len(rows) must be a power
// of two (the shape checks ensure it; otherwise it panics), and the rows must have the widths the
// caller expects (hash_slice is injective only per fixed width).
func MerkleRoot(rows [][]field.Fp, idx int, path []Digest) Digest {
	h := make([]Digest, len(rows))
	for i, r := range rows {
		h[i] = poseidon2.HashSlice(r)
	}
	cur := poseidon2.TreeCompress(h)
	for _, s := range path {
		if idx&1 == 0 {
			cur = poseidon2.Compress(cur, s)
		} else {
			cur = poseidon2.Compress(s, cur)
		}
		idx >>= 1
	}
	return cur
}

// VerifyWhir is verify_whir (spec A §6.4): roots and openings are in commitment-list order
// (openings[c][col] = stacking opening of stacked column col of commitment c), uCube has length
// l_skip + n_stack. The transcript must already have observed the stacking openings.
func VerifyWhir(tr *transcript.Transcript, p params.SystemParams, roots []Digest, openings [][]field.Fp4, uCube []field.Fp4, proof *WhirProof) error {
	if err := checkWhirParams(p); err != nil {
		return err
	}
	m := p.LSkip + p.NStack
	if len(roots) == 0 || len(roots) != len(openings) || len(uCube) != m {
		return fmt.Errorf("%w: %d roots, %d opening lists, point of length %d", ErrOpeningInput, len(roots), len(openings), len(uCube))
	}
	widths := make([]int, len(openings))
	total := 0
	for c, o := range openings {
		widths[c] = len(o)
		total += len(o)
	}
	if err := CheckWhirShape(p, widths, proof); err != nil {
		return stageShapeError(ErrWhirShape, err)
	}
	k, R := p.Whir.K, len(p.Whir.Rounds)
	if !tr.CheckWitness(p.Whir.MuPowBits, proof.MuPowWitness) {
		return ErrWhirMuPow
	}
	mu := tr.SampleExt()
	muPows := field.PowersFp4(mu, total)
	var claim field.Fp4
	i := 0
	for _, o := range openings {
		for _, v := range o {
			claim = claim.Add(muPows[i].Mul(v))
			i++
		}
	}
	lrs := m + p.LogBlowup
	alphas := make([]field.Fp4, 0, R*k)
	z0s := make([]field.Fp4, 0, R)
	zs := make([][]field.Fp, 0, R)
	gammas := make([]field.Fp4, 0, R)
	g := 1 << k
	for r, rc := range p.Whir.Rounds {
		last := r == R-1
		alphasR := make([]field.Fp4, 0, k)
		for j := range k {
			s := r*k + j
			e1, e2 := proof.WhirSumcheckPolys[s][0], proof.WhirSumcheckPolys[s][1]
			tr.ObserveExt(e1)
			tr.ObserveExt(e2)
			if !tr.CheckWitness(p.Whir.FoldingPowBits, proof.FoldingPowWitnesses[s]) {
				return fmt.Errorf("%w (sumcheck round %d)", ErrWhirFoldingPow, s)
			}
			alpha := tr.SampleExt()
			alphasR = append(alphasR, alpha)
			claim = InterpolateQuadratic12(claim, e1, e2, alpha)
		}
		var y0 *field.Fp4
		if last {
			for _, c := range proof.FinalPoly {
				tr.ObserveExt(c)
			}
		} else {
			tr.ObserveDigest(proof.CodewordCommits[r])
			z0s = append(z0s, tr.SampleExt())
			v := proof.OODValues[r]
			tr.ObserveExt(v)
			y0 = &v
		}
		if !tr.CheckWitness(p.Whir.QueryPhasePowBits, proof.QueryPhasePowWitnesses[r]) {
			return fmt.Errorf("%w (round %d)", ErrWhirQueryPow, r)
		}
		omega := field.TwoAdicGenerator(lrs)
		zsR := make([]field.Fp, 0, rc.NumQueries)
		ysR := make([]field.Fp4, 0, rc.NumQueries)
		for q := range rc.NumQueries {
			y := int(tr.SampleBits(lrs - k))
			x := omega.Exp(uint64(y))
			var vals []field.Fp4
			if r == 0 {
				vals = make([]field.Fp4, g)
				col := 0
				for c, root := range roots {
					rows := proof.InitialRoundOpenedRows[c][q]
					if MerkleRoot(rows, y, proof.InitialRoundMerkleProofs[c][q]) != root {
						return fmt.Errorf("%w (round 0, commitment %d, query %d)", ErrWhirQuery, c, q)
					}
					for cc := 0; cc < widths[c]; cc++ {
						for t := range g {
							vals[t] = vals[t].Add(muPows[col].MulBase(rows[t][cc]))
						}
						col++
					}
				}
			} else {
				vals = append([]field.Fp4(nil), proof.CodewordOpenedValues[r-1][q]...)
				rows := make([][]field.Fp, g)
				for t, v := range vals {
					rows[t] = v[:]
				}
				if MerkleRoot(rows, y, proof.CodewordMerkleProofs[r-1][q]) != proof.CodewordCommits[r-1] {
					return fmt.Errorf("%w (round %d, query %d)", ErrWhirQuery, r, q)
				}
			}
			zsR = append(zsR, x.Exp(uint64(g)))
			ysR = append(ysR, BinaryKFold(vals, alphasR, x))
		}
		gamma := tr.SampleExt()
		if y0 != nil {
			claim = claim.Add(y0.Mul(gamma))
		}
		gp := gamma
		for _, yv := range ysR {
			gp = gp.Mul(gamma)
			claim = claim.Add(yv.Mul(gp))
		}
		gammas = append(gammas, gamma)
		zs = append(zs, zsR)
		alphas = append(alphas, alphasR...)
		lrs--
	}

	t := k * R
	acc := MobiusEqMLE(uCube[:t], alphas[:t]).Mul(EvalMLEEvals(proof.FinalPoly, uCube[t:]))
	j := k
	for i := range R {
		aslc := alphas[j:t]
		n := t - j + 1
		gamma := gammas[i]
		if i != R-1 {
			zp := PowersOf2(z0s[i], n)
			acc = acc.Add(gamma.Mul(EqMLE(aslc, zp[:n-1])).Mul(Horner(proof.FinalPoly, zp[n-1])))
		}
		gp := gamma
		for _, z := range zs[i] {
			gp = gp.Mul(gamma)
			zp := PowersOf2(field.Lift(z), n)
			acc = acc.Add(gp.Mul(EqMLE(aslc, zp[:n-1])).Mul(Horner(proof.FinalPoly, zp[n-1])))
		}
		j += k
	}
	if acc != claim {
		return ErrWhirFinal
	}
	return nil
}
