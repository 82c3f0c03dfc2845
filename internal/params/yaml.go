package params

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"regexp"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// ErrNoParams is returned (wrapped) by LoadFile and ParseSection when the document has no
// `params` section.
var ErrNoParams = errors.New("no params section")

// Spec is the `params` section of a config file, as written.
type Spec struct {
	// SecurityBits is the target: it sets the WHIR query counts when whir.rounds is absent, and
	// the soundness total is checked against it.
	SecurityBits        int
	LSkip               int
	NStack              int
	WStack              int
	LogBlowup           int
	MaxConstraintDegree int
	Whir                WhirSpec
	Logup               LogUpSecurityParameters
}

// WhirSpec is the `whir` subsection.
type WhirSpec struct {
	K int
	// MaxLogFinalPolyLen is the builder's log_final_poly_len bound (rounds stop once the remaining
	// log-length is ≤ it).
	MaxLogFinalPolyLen int
	MuPowBits          int
	FoldingPowBits     int
	QueryPhasePowBits  int
	Proximity          WhirProximityStrategy
	// Rounds, when non-nil, is used as given instead of being derived.
	Rounds []WhirRoundConfig
}

// Build turns the spec into SystemParams (deriving whir.rounds when absent) and validates them.
func (s Spec) Build() (SystemParams, error) {
	switch {
	case s.SecurityBits > MaxSecurityBits:
		return SystemParams{}, fmt.Errorf("security_bits must be ≤ %d", MaxSecurityBits)
	case s.Whir.K < 1:
		return SystemParams{}, fmt.Errorf("whir.k must be ≥ 1")
	case s.LogBlowup < 1:
		return SystemParams{}, fmt.Errorf("log_blowup must be ≥ 1")
	case s.LSkip+s.NStack+s.LogBlowup > TwoAdicity:
		return SystemParams{}, fmt.Errorf("l_skip + n_stack + log_blowup must be ≤ %d (two-adicity), got %d", TwoAdicity, s.LSkip+s.NStack+s.LogBlowup)
	}
	var whir WhirConfig
	if s.Whir.Rounds == nil {
		whir = NewWhirConfig(s.LogBlowup, s.LSkip+s.NStack, WhirParams{
			K: s.Whir.K, LogFinalPolyLen: s.Whir.MaxLogFinalPolyLen, QueryPhasePowBits: s.Whir.QueryPhasePowBits,
			Proximity: s.Whir.Proximity, FoldingPowBits: s.Whir.FoldingPowBits, MuPowBits: s.Whir.MuPowBits,
		}, s.SecurityBits)
		if len(whir.Rounds) == 0 {
			return SystemParams{}, fmt.Errorf("whir.max_log_final_poly_len %d ≥ log_stacked_height %d: the builder makes no WHIR round (R must be ≥ 1)",
				s.Whir.MaxLogFinalPolyLen, s.LSkip+s.NStack)
		}
	} else {
		whir = WhirConfig{K: s.Whir.K, Rounds: append([]WhirRoundConfig{}, s.Whir.Rounds...), MuPowBits: s.Whir.MuPowBits,
			QueryPhasePowBits: s.Whir.QueryPhasePowBits, FoldingPowBits: s.Whir.FoldingPowBits, Proximity: s.Whir.Proximity}
	}
	p := SystemParams{LSkip: s.LSkip, NStack: s.NStack, WStack: s.WStack, LogBlowup: s.LogBlowup, Whir: whir,
		Logup: s.Logup, MaxConstraintDegree: s.MaxConstraintDegree}
	if err := p.Validate(); err != nil {
		return SystemParams{}, err
	}
	if lf := p.LogFinalPolyLen(); lf > s.Whir.MaxLogFinalPolyLen {
		return SystemParams{}, fmt.Errorf("whir.rounds: log_final_poly_len %d exceeds whir.max_log_final_poly_len %d", lf, s.Whir.MaxLogFinalPolyLen)
	}
	return p, nil
}

// LoadFile reads the `params` section of the config file at path (other top-level keys belong to
// the root command and are ignored), decodes it strictly and builds validated SystemParams. It
// returns an error wrapping ErrNoParams when the file has no params section. Errors name the file,
// the key (params.whir.k) and, where known, the line.
func LoadFile(path string) (SystemParams, Spec, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return SystemParams{}, Spec{}, err
	}
	spec, err := ParseSection(data)
	if err != nil {
		return SystemParams{}, Spec{}, fmt.Errorf("config file %s: %w", path, err)
	}
	p, err := spec.Build()
	if err != nil {
		return SystemParams{}, Spec{}, fmt.Errorf("config file %s: params: %w", path, err)
	}
	return p, spec, nil
}

// ParseSection decodes the `params` section of a YAML document strictly: unknown keys, missing
// keys, non-integers and negative values are errors naming the key.
func ParseSection(data []byte) (Spec, error) {
	var top yaml.Node
	if err := yaml.Unmarshal(data, &top); err != nil {
		return Spec{}, err
	}
	if len(top.Content) == 0 {
		return Spec{}, ErrNoParams
	}
	doc := top.Content[0]
	if doc.Kind != yaml.MappingNode {
		return Spec{}, fmt.Errorf("line %d: the config file must be a mapping of keys", doc.Line)
	}
	var section *yaml.Node
	for i := 0; i+1 < len(doc.Content); i += 2 {
		if doc.Content[i].Value == "params" {
			section = doc.Content[i+1]
		}
	}
	if section == nil {
		return Spec{}, ErrNoParams
	}
	if section.Kind != yaml.MappingNode {
		return Spec{}, fmt.Errorf("line %d: params must be a mapping", section.Line)
	}

	var f yFile
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil && !errors.Is(err, io.EOF) {
		return Spec{}, rewriteYAMLError(err)
	}
	return f.Params.spec()
}

type yFile struct {
	Params yParams        `yaml:"params"`
	Rest   map[string]any `yaml:",inline"`
}

type yParams struct {
	SecurityBits        yInt   `yaml:"security_bits"`
	LSkip               yInt   `yaml:"l_skip"`
	NStack              yInt   `yaml:"n_stack"`
	WStack              yInt   `yaml:"w_stack"`
	LogBlowup           yInt   `yaml:"log_blowup"`
	MaxConstraintDegree yInt   `yaml:"max_constraint_degree"`
	Whir                yWhir  `yaml:"whir"`
	Logup               yLogup `yaml:"logup"`
}

type yWhir struct {
	K                  yInt       `yaml:"k"`
	MaxLogFinalPolyLen yInt       `yaml:"max_log_final_poly_len"`
	MuPowBits          yInt       `yaml:"mu_pow_bits"`
	FoldingPowBits     yInt       `yaml:"folding_pow_bits"`
	QueryPhasePowBits  yInt       `yaml:"query_phase_pow_bits"`
	Proximity          yProximity `yaml:"proximity"`
	Rounds             []yRound   `yaml:"rounds"`
}

type yProximity struct {
	Kind           yStr `yaml:"kind"`
	M              yInt `yaml:"m"`
	ListStartRound yInt `yaml:"list_start_round"`
}

type yRound struct {
	NumQueries yInt `yaml:"num_queries"`
}

type yLogup struct {
	MaxInteractionCount yInt `yaml:"max_interaction_count"`
	LogMaxMessageLength yInt `yaml:"log_max_message_length"`
	PowBits             yInt `yaml:"pow_bits"`
}

// yamlTypePaths maps the Go types of the YAML schema to their key paths, for error messages.
var yamlTypePaths = map[string]string{
	"params.yFile": "", "params.yParams": "params", "params.yWhir": "params.whir",
	"params.yProximity": "params.whir.proximity", "params.yRound": "params.whir.rounds[]",
	"[]params.yRound": "params.whir.rounds", "params.yLogup": "params.logup",
}

var (
	reUnknownField = regexp.MustCompile(`^line (\d+): field (.*) not found in type (\S+)$`)
	reCannot       = regexp.MustCompile("^line (\\d+): cannot unmarshal (\\S+)(?: `.*`)? into (\\S+)$")
)

// rewriteYAMLError turns yaml.v3 type errors into messages naming config keys.
func rewriteYAMLError(err error) error {
	var te *yaml.TypeError
	if !errors.As(err, &te) || len(te.Errors) == 0 {
		return err
	}
	msg := te.Errors[0]
	if m := reUnknownField.FindStringSubmatch(msg); m != nil {
		if path, ok := yamlTypePaths[m[3]]; ok {
			return fmt.Errorf("line %s: unknown key %s.%s", m[1], path, m[2])
		}
	}
	if m := reCannot.FindStringSubmatch(msg); m != nil {
		if path, ok := yamlTypePaths[m[3]]; ok && path != "" {
			what := "a mapping"
			if strings.HasPrefix(m[3], "[]") {
				what = "a list"
			}
			return fmt.Errorf("line %s: %s must be %s, got %s", m[1], path, what, m[2])
		}
	}
	return errors.New(msg)
}

// yInt is an integer leaf that records presence, line and a bad (non-integer) value instead of
// failing, so that errors can name the key.
type yInt struct {
	set  bool
	v    int64
	line int
	bad  string
}

func (y *yInt) UnmarshalYAML(n *yaml.Node) error {
	y.set, y.line = true, n.Line
	if n.Kind != yaml.ScalarNode {
		y.bad = "a " + nodeKindName(n.Kind)
		return nil
	}
	if err := n.Decode(&y.v); err != nil {
		y.bad = strconv.Quote(n.Value)
	}
	return nil
}

// yStr is a string leaf like yInt.
type yStr struct {
	set  bool
	v    string
	line int
	bad  string
}

func (y *yStr) UnmarshalYAML(n *yaml.Node) error {
	y.set, y.line = true, n.Line
	if n.Kind != yaml.ScalarNode {
		y.bad = "a " + nodeKindName(n.Kind)
		return nil
	}
	y.v = n.Value
	return nil
}

func nodeKindName(k yaml.Kind) string {
	switch k {
	case yaml.MappingNode:
		return "mapping"
	case yaml.SequenceNode:
		return "list"
	case yaml.AliasNode:
		return "alias"
	}
	return "non-scalar"
}

// maxYAMLInt bounds every integer of the section (all are u32 in practice).
const maxYAMLInt = math.MaxUint32

// sectionReader collects the first error while reading fields.
type sectionReader struct{ err error }

func (r *sectionReader) fail(line int, format string, args ...any) {
	if r.err == nil {
		msg := fmt.Sprintf(format, args...)
		if line > 0 {
			msg = fmt.Sprintf("line %d: %s", line, msg)
		}
		r.err = errors.New(msg)
	}
}

// int reads a required integer ≥ lo.
func (r *sectionReader) int(key string, y yInt, lo int64) int {
	switch {
	case !y.set:
		r.fail(0, "params.%s is required", key)
	case y.bad != "":
		r.fail(y.line, "params.%s must be an integer, got %s", key, y.bad)
	case y.v < lo:
		r.fail(y.line, "params.%s must be ≥ %d", key, lo)
	case y.v > maxYAMLInt:
		r.fail(y.line, "params.%s must be ≤ %d", key, int64(maxYAMLInt))
	default:
		return int(y.v)
	}
	return 0
}

// forbid rejects a key that the chosen variant does not take.
func (r *sectionReader) forbid(key string, y yInt, kind string) {
	if y.set {
		r.fail(y.line, "params.%s is not used by proximity kind %s", key, kind)
	}
}

func (y yParams) spec() (Spec, error) {
	r := &sectionReader{}
	s := Spec{
		SecurityBits:        r.int("security_bits", y.SecurityBits, 0),
		LSkip:               r.int("l_skip", y.LSkip, 0),
		NStack:              r.int("n_stack", y.NStack, 0),
		WStack:              r.int("w_stack", y.WStack, 1),
		LogBlowup:           r.int("log_blowup", y.LogBlowup, 1),
		MaxConstraintDegree: r.int("max_constraint_degree", y.MaxConstraintDegree, 1),
	}
	w := y.Whir
	s.Whir = WhirSpec{
		K:                  r.int("whir.k", w.K, 1),
		MaxLogFinalPolyLen: r.int("whir.max_log_final_poly_len", w.MaxLogFinalPolyLen, 0),
		MuPowBits:          r.int("whir.mu_pow_bits", w.MuPowBits, 0),
		FoldingPowBits:     r.int("whir.folding_pow_bits", w.FoldingPowBits, 0),
		QueryPhasePowBits:  r.int("whir.query_phase_pow_bits", w.QueryPhasePowBits, 0),
	}
	px := w.Proximity
	switch {
	case !px.Kind.set:
		r.fail(0, "params.whir.proximity.kind is required")
	case px.Kind.bad != "":
		r.fail(px.Kind.line, "params.whir.proximity.kind must be a string, got %s", px.Kind.bad)
	default:
		kind, ok := parseProximityKind(px.Kind.v)
		if !ok {
			r.fail(px.Kind.line, "params.whir.proximity.kind %q: must be unique_decoding, split_unique_list or list_decoding", px.Kind.v)
			break
		}
		s.Whir.Proximity.Kind = kind
		switch kind {
		case UniqueDecodingKind:
			r.forbid("whir.proximity.m", px.M, px.Kind.v)
			r.forbid("whir.proximity.list_start_round", px.ListStartRound, px.Kind.v)
		case SplitUniqueListKind:
			s.Whir.Proximity.M = r.int("whir.proximity.m", px.M, 1)
			s.Whir.Proximity.ListStartRound = r.int("whir.proximity.list_start_round", px.ListStartRound, 0)
		case ListDecodingKind:
			s.Whir.Proximity.M = r.int("whir.proximity.m", px.M, 1)
			r.forbid("whir.proximity.list_start_round", px.ListStartRound, px.Kind.v)
		}
	}
	if w.Rounds != nil {
		s.Whir.Rounds = make([]WhirRoundConfig, len(w.Rounds))
		for i, rd := range w.Rounds {
			s.Whir.Rounds[i].NumQueries = r.int(fmt.Sprintf("whir.rounds[%d].num_queries", i), rd.NumQueries, 1)
		}
	}
	l := y.Logup
	s.Logup = LogUpSecurityParameters{
		MaxInteractionCount: uint32(r.int("logup.max_interaction_count", l.MaxInteractionCount, 1)),
		LogMaxMessageLength: uint32(r.int("logup.log_max_message_length", l.LogMaxMessageLength, 0)),
		PowBits:             r.int("logup.pow_bits", l.PowBits, 0),
	}
	if r.err != nil {
		return Spec{}, r.err
	}
	return s, nil
}
