package air

import "fmt"

// KeyedAir is an AIR defined by its verifying key rather than by Go code: an AIR imported from
// an OpenVM key (or from a proving-key file). Its Eval replays the key's DAG into the builder
// (constraints in constraint_idx order, then the interactions), so the trace checks treat it as
// any other AIR; keygen must not rebuild its key from Eval (the rebuilt DAG may be numbered
// differently), it takes VerifyingKey as it is.
type KeyedAir interface {
	Air
	// VerifyingKey is the AIR's key as imported (preprocessed commitment included).
	VerifyingKey() *VerifyingKey
}

// importedAir is the KeyedAir of an AIR without a preprocessed trace; importedPreAir adds one.
type importedAir struct {
	name string
	vk   *VerifyingKey
}

type importedPreAir struct {
	importedAir
	pre Matrix
}

// NewKeyedAir returns the AIR that vk defines, named name. pre is its preprocessed trace, given
// exactly when vk has a preprocessed width (its shape is checked against the width; its
// commitment is checked by keygen). vk must have passed ValidateImported.
func NewKeyedAir(name string, vk *VerifyingKey, pre *Matrix) (KeyedAir, error) {
	if vk == nil || vk.DAG == nil {
		return nil, fmt.Errorf("%w: AIR %s: no key", ErrInvalidKey, name)
	}
	a := importedAir{name: name, vk: vk}
	w := vk.Width
	switch {
	case pre == nil && w.HasPreprocessed():
		return nil, fmt.Errorf("%w: AIR %s has a preprocessed trace of width %d, none was given", ErrPreprocessedData, name, w.Preprocessed)
	case pre == nil:
		return &a, nil
	case !w.HasPreprocessed():
		return nil, fmt.Errorf("%w: AIR %s has no preprocessed trace, one was given", ErrPreprocessedData, name)
	}
	if err := pre.Check(); err != nil {
		return nil, fmt.Errorf("%w: AIR %s: preprocessed trace: %v", ErrPreprocessedData, name, err)
	}
	if pre.Width != w.Preprocessed {
		return nil, fmt.Errorf("%w: AIR %s: preprocessed trace has width %d, the key says %d", ErrPreprocessedData, name, pre.Width, w.Preprocessed)
	}
	return &importedPreAir{importedAir: a, pre: *pre}, nil
}

func (a *importedAir) Name() string                { return a.name }
func (a *importedAir) Width() TraceWidth           { return a.vk.Width }
func (a *importedAir) NumPublicValues() int        { return a.vk.NumPublicValues }
func (a *importedAir) VerifyingKey() *VerifyingKey { return a.vk }

// Eval replays the DAG: one expression per node, in node order.
func (a *importedAir) Eval(b *Builder) {
	g := a.vk.DAG
	ex := make([]*Expr, len(g.Nodes))
	for i, n := range g.Nodes {
		switch n.Op {
		case OpVariable:
			ex[i] = V(n.Var)
		case OpConstant:
			ex[i] = Const(n.C)
		case OpIsFirstRow:
			ex[i] = IsFirstRow()
		case OpIsLastRow:
			ex[i] = IsLastRow()
		case OpIsTransition:
			ex[i] = IsTransition()
		case OpAdd:
			ex[i] = Add(ex[n.L], ex[n.R])
		case OpSub:
			ex[i] = Sub(ex[n.L], ex[n.R])
		case OpMul:
			ex[i] = Mul(ex[n.L], ex[n.R])
		case OpNeg:
			ex[i] = Neg(ex[n.L])
		default:
			panic(fmt.Sprintf("air: node %d has unknown kind %d", i, n.Op))
		}
	}
	for _, c := range g.ConstraintIdx {
		b.AssertZero(ex[c])
	}
	for _, it := range g.Interactions {
		msg := make([]*Expr, len(it.Message))
		for j, m := range it.Message {
			msg[j] = ex[m]
		}
		b.PushInteraction(it.Bus, msg, ex[it.Count], it.CountWeight)
	}
}

// PreprocessedTrace is the preprocessed trace given to NewKeyedAir.
func (a *importedPreAir) PreprocessedTrace() Matrix { return a.pre }
