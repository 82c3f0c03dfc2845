package selftest

import (
	"fmt"

	"github.com/metalprove/metalprove/internal/field"
	"github.com/metalprove/metalprove/internal/poseidon2"
)

func poseidon2Checks() []Check {
	return []Check{
		{Name: "poseidon2/plonky3-kat", Run: checkPoseidon2KAT},
		{Name: "poseidon2/perm-vectors", Run: checkPoseidon2PermVectors},
		{Name: "poseidon2/hash-slice", Run: checkPoseidon2HashSlice},
		{Name: "poseidon2/compress", Run: checkPoseidon2Compress},
	}
}

func checkPerm(name string, in, want [16]field.Fp) error {
	got := in
	poseidon2.Permute(&got)
	if got != want {
		return fmt.Errorf("Perm(%s) = %v, want %v", name, got, want)
	}
	return nil
}

// checkPoseidon2KAT: Plonky3 test_default_babybear_poseidon2_width_16 (baby-bear/src/poseidon2.rs),
// spec vectors §A.
func checkPoseidon2KAT() error {
	return checkPerm("plonky3 KAT input",
		[16]field.Fp{894848333, 1437655012, 1200606629, 1690012884, 71131202, 1749206695, 1717947831, 120589055,
			19776022, 42382981, 1831865506, 724844064, 171220207, 1299207443, 227047920, 1783754913},
		[16]field.Fp{516096821, 90309867, 1101817252, 1660784290, 360715097, 1789519026, 1788910906, 563338433,
			319524748, 1741414159, 1650859320, 894311162, 1121347488, 1692793758, 1052633829, 1344246938})
}

// checkPoseidon2PermVectors: permutations of 0^16 and 0..15 (spec vectors §B).
func checkPoseidon2PermVectors() error {
	if err := checkPerm("0^16", [16]field.Fp{},
		[16]field.Fp{1168947398, 128782440, 747404447, 883925857, 360581875, 1704698758, 1878363991, 1054281681,
			682225194, 705839125, 1218819873, 41544645, 1095344608, 174996601, 1678438226, 11259290}); err != nil {
		return err
	}
	return checkPerm("0..15", [16]field.Fp{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15},
		[16]field.Fp{1906786279, 1737026427, 1959749225, 700325316, 1638050605, 1021608788, 1726691001, 1761127344,
			1552405120, 417318995, 36799261, 1215172152, 614923223, 1300746575, 957311597, 304856115})
}

// checkPoseidon2HashSlice: hash_slice of 1..n for n = 0, 1, 8, 9, 16, 17 (spec vectors §C; covers
// full and partial final blocks).
func checkPoseidon2HashSlice() error {
	for _, c := range []struct {
		n    int
		want poseidon2.Digest
	}{
		{0, poseidon2.Digest{}},
		{1, poseidon2.Digest{1380709490, 1568141733, 1163275192, 1977277973, 128327085, 765730249, 966740217, 365525466}},
		{8, poseidon2.Digest{766127264, 1750513607, 1038115664, 1351438670, 1338302971, 1958881547, 1778633879, 1495371656}},
		{9, poseidon2.Digest{610210315, 1049152689, 1983597912, 1642023152, 478432732, 1380464985, 1787471669, 1639353530}},
		{16, poseidon2.Digest{484098264, 1160663373, 503312574, 1110789961, 1538770609, 1042332825, 1628922041, 1590154732}},
		{17, poseidon2.Digest{339289452, 1784464411, 361564606, 1065557929, 968838104, 1204043760, 463967653, 510091848}},
	} {
		v := make([]field.Fp, c.n)
		for i := range v {
			v[i] = field.Fp(i + 1)
		}
		if got := poseidon2.HashSlice(v); got != c.want {
			return fmt.Errorf("hash_slice([1..%d]) = %v, want %v", c.n, got, c.want)
		}
	}
	return nil
}

// checkPoseidon2Compress: compress([1..8], [9..16]) (spec vectors §C) and a 4-leaf tree_compress
// against the composition of compress.
func checkPoseidon2Compress() error {
	l := poseidon2.Digest{1, 2, 3, 4, 5, 6, 7, 8}
	r := poseidon2.Digest{9, 10, 11, 12, 13, 14, 15, 16}
	want := poseidon2.Digest{1673702100, 1525859233, 120947562, 429360967, 1845930427, 111235020, 438992764, 1404408233}
	if got := poseidon2.Compress(l, r); got != want {
		return fmt.Errorf("compress([1..8], [9..16]) = %v, want %v", got, want)
	}
	if got, want := poseidon2.TreeCompress([]poseidon2.Digest{l, r, r, l}),
		poseidon2.Compress(poseidon2.Compress(l, r), poseidon2.Compress(r, l)); got != want {
		return fmt.Errorf("tree_compress of 4 leaves = %v, want %v", got, want)
	}
	return nil
}
