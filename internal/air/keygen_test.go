package air_test

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/metalprove/metalprove/internal/air"
	"github.com/metalprove/metalprove/internal/air/testair"
	"github.com/metalprove/metalprove/internal/field"
	"github.com/metalprove/metalprove/internal/params"
	"github.com/metalprove/metalprove/internal/poseidon2"
)

func unhex(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.Join(strings.Fields(s), ""))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// fibVKGolden is the postcard of FibonacciAir's StarkVerifyingKey, written by hand from B §1.8
// and the node list of TestDAGFibonacciGolden (text after "|" is a comment).
const fibVKGolden = `
00                      | preprocessed_data None
00 00 02 03 01          | width {None, [], 2}, 3 publics, need_rot
15                      | 21 nodes
01                      | 0 IsFirstRow
00 01 00 00 00          | 1 Var Main{0,0} 0
00 02 00                | 2 Var Public 0
06 01 02 01             | 3 Sub
08 00 03 02             | 4 Mul
00 01 00 00 01          | 5 Var Main{0,0} 1
00 02 01                | 6 Public 1
06 05 06 01             | 7
08 00 07 02             | 8
03                      | 9 IsTransition
00 01 00 01 00          | 10 Var Main{0,1} 0
06 05 0a 01             | 11
08 09 0b 02             | 12
05 01 05 01             | 13 Add
00 01 00 01 01          | 14 Var Main{0,1} 1
06 0d 0e 01             | 15
08 09 0f 02             | 16
02                      | 17 IsLastRow
00 02 02                | 18 Public 2
06 05 12 01             | 19
08 11 13 02             | 20
05 04 08 0c 10 14       | constraint_idx
00                      | interactions
02 00 00                | max degree 2, optional, no unused variables`

func stripComments(s string) string {
	var out []string
	for _, line := range strings.Split(s, "\n") {
		data, _, _ := strings.Cut(line, "|")
		out = append(out, strings.Fields(data)...)
	}
	return strings.Join(out, "")
}

func TestMontgomery(t *testing.T) {
	// 2^32 mod p = 0x0ffffffe; −1 → p − 0x0ffffffe = 0x68000003.
	if air.Montgomery(field.One) != 0x0ffffffe || air.Montgomery(field.Fp(field.P-1)) != 0x68000003 || air.Montgomery(0) != 0 {
		t.Errorf("montgomery %x %x", air.Montgomery(field.One), air.Montgomery(field.Fp(field.P-1)))
	}
}

func TestFibonacciVKPostcard(t *testing.T) {
	vk, err := air.Keygen(testair.FibonacciAir{}, 3, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := unhex(t, stripComments(fibVKGolden))
	if got := vk.AppendPostcard(nil); !bytes.Equal(got, want) {
		t.Fatalf("vk postcard\n got  % x\n want % x", got, want)
	}
}

func TestDummyReceiveVKPostcard(t *testing.T) {
	// Constants are the Montgomery varint: p−1 → 83 80 80 c0 06.
	vk, err := air.Keygen(testair.DummyInteractionAir{FieldWidth: 1, Bus: 2, CountWeight: 5}, 3, true, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := unhex(t, `00 00 00 02 00 00
		04 00 01 00 00 01  04 83 80 80 c0 06  00 01 00 00 00  08 01 02 01
		00  01 01 00 03 02 05
		01 01 00`)
	if got := vk.AppendPostcard(nil); !bytes.Equal(got, want) {
		t.Fatalf("vk postcard\n got  % x\n want % x", got, want)
	}
}

func TestUnusedVariablesAndPreprocessed(t *testing.T) {
	// FibonacciSelectorAir: sel next never used, need_rot → (Preprocessed{1}, 0) unused.
	pre := &air.PreprocessedVK{HypercubeDim: -1, StackingWidth: 1}
	pre.Commit[0] = field.One
	vk, err := air.Keygen(testair.FibonacciSelectorAir{Sels: testair.AlternatingSels(2)}, 3, false, pre)
	if err != nil {
		t.Fatal(err)
	}
	if want := []air.Var{{Entry: air.EntryPreprocessed, Offset: 1}}; !reflect.DeepEqual(vk.UnusedVariables, want) || !vk.NeedRot {
		t.Errorf("unused %v need_rot %v", vk.UnusedVariables, vk.NeedRot)
	}
	b := vk.AppendPostcard(nil)
	// Some(commit = [1, 0 × 7]) with 1 → fe ff ff 7f, hypercube_dim −1 → zig-zag 01, width 1; then Some(1).
	head := unhex(t, "01 fe ff ff 7f 00 00 00 00 00 00 00 01 01 01 01 00 02 03 01")
	if !bytes.HasPrefix(b, head) || !bytes.HasSuffix(b, unhex(t, "03 00 01 00 01 00")) {
		t.Errorf("postcard % x", b)
	}
	// DummyInteractionAir without rotation: only offset-0 entries; none unused. Partitioned
	// SumAir-like AIR with an unused cached column.
	vk, err = air.Keygen(unusedAir{}, 3, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []air.Var{{Entry: air.EntryMain, PartIndex: 0, Index: 1}, {Entry: air.EntryMain, PartIndex: 1, Index: 0}}
	if !reflect.DeepEqual(vk.UnusedVariables, want) || vk.NeedRot {
		t.Errorf("unused %v", vk.UnusedVariables)
	}
	if _, err := air.Keygen(testair.FibonacciSelectorAir{}, 3, false, nil); !errors.Is(err, air.ErrPreprocessedData) {
		t.Errorf("missing preprocessed: %v", err)
	}
	if _, err := air.Keygen(testair.FibonacciSelectorAir{}, 2, false, pre); !errors.Is(err, air.ErrDegreeExceeded) {
		t.Errorf("degree: %v", err)
	}
	if _, err := air.Keygen(testair.SelfInteractionAir{W: 0}, 3, false, nil); !errors.Is(err, air.ErrWidthZero) {
		t.Errorf("width: %v", err)
	}
	if _, err := air.Keygen(testair.DummyInteractionAir{FieldWidth: 0}, 3, false, nil); !errors.Is(err, air.ErrEmptyMessage) {
		t.Errorf("empty message: %v", err)
	}
}

// unusedAir: cached part 0 width 2 (column 1 unused), common width 1 (unused); uses column 0.
type unusedAir struct{}

func (unusedAir) Name() string { return "unused" }
func (unusedAir) Width() air.TraceWidth {
	return air.TraceWidth{CachedMains: []int{2}, CommonMain: 1}
}
func (unusedAir) NumPublicValues() int { return 0 }
func (unusedAir) Eval(b *air.Builder)  { b.AssertBool(b.CachedMain(0, 0)[0]) }

func TestTraceHeightConstraintsExamples(t *testing.T) {
	logup := params.LogUpSecurityParameters{MaxInteractionCount: 1 << 30, LogMaxMessageLength: 7}
	key := func(a air.Air) *air.VerifyingKey {
		var pre *air.PreprocessedVK
		if a.Width().HasPreprocessed() {
			pre = &air.PreprocessedVK{}
		}
		vk, err := air.Keygen(a, 3, false, pre)
		if err != nil {
			t.Fatal(err)
		}
		return vk
	}
	send := func(bus uint16, w uint32) air.Air {
		return testair.DummyInteractionAir{FieldWidth: 1, IsSend: true, Bus: bus, CountWeight: w}
	}
	// interaction_trace_height_constraints.
	vks := []*air.VerifyingKey{key(testair.FibonacciSelectorAir{Lookup: true}), key(send(0, 3)), key(send(0, 1)), key(send(1, 7))}
	got, err := air.TraceHeightConstraints(vks, logup)
	if err != nil {
		t.Fatal(err)
	}
	want := []air.LinearConstraint{{[]uint32{0, 3, 1, 0}, field.P}, {[]uint32{0, 0, 0, 7}, field.P}, {[]uint32{1, 1, 1, 1}, 1 << 30}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
	// trace_height_constraints_implied_removal: all weights 0 → only the count constraint.
	vks = []*air.VerifyingKey{key(send(0, 0)), key(send(0, 0)), key(send(1, 0))}
	got, _ = air.TraceHeightConstraints(vks, logup)
	if want := []air.LinearConstraint{{[]uint32{1, 1, 1}, 1 << 30}}; !reflect.DeepEqual(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
	// message length + 1 must fit 2^log_max_message_length.
	if _, err := air.TraceHeightConstraints([]*air.VerifyingKey{key(testair.DummyInteractionAir{FieldWidth: 2})}, params.LogUpSecurityParameters{LogMaxMessageLength: 1}); err == nil {
		t.Error("long message accepted")
	}
}

func TestMultiVKPreimage(t *testing.T) {
	p, err := params.AppParams(21)
	if err != nil {
		t.Fatal(err)
	}
	m, err := air.MultiKeygen(p, []air.Air{testair.FibonacciAir{}}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	// params (A §3.6 golden) ‖ 1 AIR ‖ Fibonacci vk ‖ [ [1] < max_interaction_count ].
	want := unhex(t, "04 11 80 10 01 04 03 c1 01 58 51 0f 14 05 00 81 80 80 c0 07 07 12 03")
	want = append(want, 1)
	want = append(want, unhex(t, stripComments(fibVKGolden))...)
	want = append(want, 1, 1, 0)
	want = binary.AppendUvarint(want, uint64(p.Logup.MaxInteractionCount))
	vkb := m.AppendPostcard(nil)
	if !bytes.Equal(vkb, want) {
		t.Fatalf("multi vk\n got  % x\n want % x", vkb, want)
	}
	pre := m.PreHashPreimage()
	if binary.LittleEndian.Uint32(pre) != 3 || binary.LittleEndian.Uint64(pre[4:]) != uint64(len(vkb)) || !bytes.Equal(pre[12:], vkb) {
		t.Fatalf("preimage % x", pre[:12])
	}
	fs := make([]field.Fp, len(pre))
	for i, x := range pre {
		fs[i] = field.Fp(x)
	}
	if m.PreHash() != poseidon2.HashSlice(fs) {
		t.Error("prehash")
	}
}
