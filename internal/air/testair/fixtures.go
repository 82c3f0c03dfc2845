package testair

import (
	"github.com/metalprove/metalprove/internal/air"
	"github.com/metalprove/metalprove/internal/field"
	"github.com/metalprove/metalprove/internal/stdrng"
)

// Instance is one AIR with a trace of it (the preprocessed trace, when there is one, is the AIR's
// own).
type Instance struct {
	Air   air.Air
	Trace air.TraceInput
}

// Height is the trace height.
func (in Instance) Height() int {
	if len(in.Trace.CachedMains) > 0 {
		return in.Trace.CachedMains[0].Height
	}
	return in.Trace.CommonMain.Height
}

// MainCells returns the main trace as one column-major matrix of Width().MainWidth() columns: the
// cached parts in DAG order, then the common main (the layout of a trace file section).
func (in Instance) MainCells() []field.Fp {
	var out []field.Fp
	for _, m := range in.Trace.CachedMains {
		out = append(out, m.Values...)
	}
	if in.Air.Width().CommonMain != 0 {
		out = append(out, in.Trace.CommonMain.Values...)
	}
	return out
}

// SplitMain is the inverse of MainCells (air.SplitMain).
func SplitMain(a air.Air, height int, cells, public []field.Fp) (air.TraceInput, error) {
	return air.SplitMain(a, height, cells, public)
}

// Fibonacci is FibFixture(a, b, rows).
func Fibonacci(a, b uint32, rows int) Instance {
	return Instance{Air: FibonacciAir{}, Trace: FibTrace(a, b, rows)}
}

// FibonacciSelector is PreprocessedFibFixture(a, b, alternating sels) of the given height.
func FibonacciSelector(a, b uint32, rows int) Instance {
	sels := AlternatingSels(rows)
	return Instance{Air: FibonacciSelectorAir{Sels: sels}, Trace: FibSelectorTrace(a, b, sels)}
}

// PreprocessedCached is PreprocessedAndCachedFixture(alternating sels, k) of the given height.
func PreprocessedCached(k, rows int) Instance {
	sels := AlternatingSels(rows)
	return Instance{Air: PreprocessedCachedAir{Sels: sels, K: k}, Trace: PreprocessedCachedTrace(sels, k)}
}

// Sum is a SumAir of w cached columns with SumTrace.
func Sum(w, rows int) Instance { return Instance{Air: SumAir{W: w}, Trace: SumTrace(w, rows)} }

func dummyPair(partition bool, sender, receiver [][]uint32) []Instance {
	send := DummyInteractionAir{FieldWidth: len(sender[0]) - 1, IsSend: true, Partition: partition}
	recv := DummyInteractionAir{FieldWidth: len(receiver[0]) - 1, Partition: partition}
	return []Instance{
		{Air: send, Trace: DummyInteractionTrace(send, sender)},
		{Air: recv, Trace: DummyInteractionTrace(recv, receiver)},
	}
}

// InteractionsFixture11 is the sender (4 rows) and receiver (8 rows) of InteractionsFixture11 on
// bus 0; with partition, CachedFixture11 (the field in a cached part).
func InteractionsFixture11(partition bool) []Instance {
	return dummyPair(partition, Fixture11Sender, Fixture11Receiver)
}

// InteractionPair is a balanced sender / receiver pair of DummyInteractionAirs (field width 1,
// bus 0) drawn from seed: the sender has rows rows (count in [0, 1000), field in [0, 2^16)); the
// receiver has 2·rows rows, each sender row split into two receiver rows whose counts sum to the
// sender's count, in an order shuffled by seed. Sender and receiver heights differ, counts > 1
// exercise multiplicities, and messages repeat (the field range is small against many rows).
func InteractionPair(rows int, seed uint64) []Instance {
	rng := stdrng.SeedFromU64(seed)
	sender := make([][]uint32, rows)
	receiver := make([][]uint32, 0, 2*rows)
	for i := range sender {
		c, f := rng.Uint32()%1000, rng.Uint32()%(1<<16)
		c1 := rng.Uint32() % (c + 1)
		sender[i] = []uint32{c, f}
		receiver = append(receiver, []uint32{c1, f}, []uint32{c - c1, f})
	}
	for i := len(receiver) - 1; i > 0; i-- {
		j := int(rng.Uint32() % uint32(i+1))
		receiver[i], receiver[j] = receiver[j], receiver[i]
	}
	return dummyPair(false, sender, receiver)
}

// ShortTraces are traces shorter than 2^l_skip for the test parameters (l_skip = 2): Fibonacci of
// heights 1 and 2, the preprocessed Fibonacci of height 2, and an interaction pair whose sender
// has 1 row and receiver 2 rows (as interaction_multi_sender_receiver's 1-row trace).
func ShortTraces() []Instance {
	return append([]Instance{Fibonacci(0, 1, 1), Fibonacci(0, 1, 2), FibonacciSelector(7, 3, 2)},
		dummyPair(false, [][]uint32{{3, 7}}, [][]uint32{{1, 7}, {2, 7}})...)
}

// SelfInteractionWidths are the widths of SelfInteractionFixture.
var SelfInteractionWidths = []int{4, 7, 8, 8, 10, 100}

// SelfInteraction is SelfInteractionFixture(widths, rows, bus).
func SelfInteraction(widths []int, rows int, bus uint16) []Instance {
	out := make([]Instance, len(widths))
	for i, w := range widths {
		out[i] = Instance{Air: SelfInteractionAir{W: w, Bus: bus}, Trace: SelfInteractionTrace(w, rows)}
	}
	return out
}

// Mixture is MixtureFixture::standard with traces of height rows: Fib(8, 8, rows),
// InteractionsFixture11 (heights 4 and 8), CachedFixture11, PreprocessedFib(7, 3, alternating,
// rows) and SelfInteraction(SelfInteractionWidths, rows, bus 5): many AIRs of several heights.
func Mixture(rows int) []Instance {
	out := []Instance{Fibonacci(8, 8, rows)}
	out = append(out, InteractionsFixture11(false)...)
	out = append(out, InteractionsFixture11(true)...)
	out = append(out, FibonacciSelector(7, 3, rows))
	return append(out, SelfInteraction(SelfInteractionWidths, rows, 5)...)
}
