package air

import (
	"errors"
	"fmt"
	"strings"

	"github.com/metalprove/metalprove/internal/field"
)

// TraceInput is one AIR's trace data for the trace checks (internal/constraints). Preprocessed == nil takes the AIR's own
// preprocessed trace when it implements PreprocessedAir. CachedMains are in DAG order.
type TraceInput struct {
	Preprocessed *Matrix
	CachedMains  []Matrix
	CommonMain   Matrix
	Public       []field.Fp
}

// Failure is one constraint that does not vanish on one row.
type Failure struct {
	Air        string
	Row        int
	Constraint int // index in assert order (Eval call order), not the DAG position
	Node       int // DAG node index of the constraint
	Value      field.Fp
	Expr       string
}

func (f Failure) String() string {
	return fmt.Sprintf("air %s: row %d: constraint %d (node %d) = %v: %s", f.Air, f.Row, f.Constraint, f.Node, f.Value, f.Expr)
}

// ErrShape reports a trace that does not fit the AIR's widths.
var ErrShape = errors.New("air: trace shape mismatch")

// BusContribution is the total count one AIR puts on one (bus, message).
type BusContribution struct {
	AirIndex int
	Air      string
	Count    field.Fp
}

// Imbalance is a (bus, message) whose counts over all AIRs and rows do not sum to zero.
type Imbalance struct {
	Bus           uint16
	Message       []field.Fp
	Sum           field.Fp
	Contributions []BusContribution
}

func (im Imbalance) String() string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "bus %d message %v: counts sum to %v (", im.Bus, im.Message, im.Sum)
	for i, c := range im.Contributions {
		if i > 0 {
			sb.WriteString(", ")
		}
		fmt.Fprintf(&sb, "%s[%d]: %v", c.Air, c.AirIndex, c.Count)
	}
	sb.WriteString(")")
	return sb.String()
}
