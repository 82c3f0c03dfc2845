package params

import (
	"fmt"
	"math"
	"slices"
	"strings"
)

// Constants of OpenVM stark-sdk/src/config/mod.rs (§4.3).
const (
	DefaultKWhir                     = 4
	DefaultWhirQueryPhasePowBits     = 20
	WhirMaxLogFinalPolyLen           = 10
	SecurityBitsTarget               = 100
	DefaultAppLSkip                  = 4
	DefaultAppLogBlowup              = 1
	DefaultLeafLogBlowup             = 2
	DefaultInternalLogBlowup         = 3
	DefaultRootLogBlowup             = 4
	DefaultHookLogBlowup             = 2
	AppMaxConstraintDegree           = 3
	RecursionMaxConstraintDegree     = 4
	MaxAppLogStackedHeight           = 24
	DefaultAppLogStackedHeight       = 21
	minBabyBearLogupPowBits          = 18
	testSecurityBits                 = 5
	minAppLogStackedHeight           = WhirMaxLogFinalPolyLen + 1
	targetLogupSecurityBits          = 100.0
	babyBearLogMaxMessageLength      = 7
	testLogupMaxInteractionCount     = 1 << 30
	testWStack                       = 1 << 12
	testLogBlowup                    = 1
	testLSkip, testNStack, testKWhir = 2, 8, 3
)

// LogUpParamsBabyBear100Bits is log_up_security_params_baby_bear_100_bits(L): max interactions p,
// log message length 7, pow bits max(ceil(100 − sec0), 0) floored up to 18.
func LogUpParamsBabyBear100Bits(log2ListSize float64) LogUpSecurityParameters {
	sec0 := logupSoundness(BabyBearOrder, babyBearLogMaxMessageLength, log2ListSize)
	pow := int(math.Max(math.Ceil(targetLogupSecurityBits-sec0), 0))
	return LogUpSecurityParameters{
		MaxInteractionCount: BabyBearOrder,
		LogMaxMessageLength: babyBearLogMaxMessageLength,
		PowBits:             max(pow, minBabyBearLogupPowBits),
	}
}

// ParamsWith100BitsSecurity is params_with_100_bits_security of stark-sdk (§4.3).
func ParamsWith100BitsSecurity(logBlowup, lSkip, nStack, wStack, foldingPowBits, muPowBits int,
	proximity WhirProximityStrategy, maxConstraintDegree, whirQueryPhasePowBits, kWhir int) SystemParams {
	_, l0 := ProximityGap(proximity.InitialRound(), lSkip+nStack, logBlowup, wStack)
	logup := LogUpParamsBabyBear100Bits(l0)
	return NewSystemParams(logBlowup, lSkip, nStack, wStack, WhirMaxLogFinalPolyLen, foldingPowBits,
		muPowBits, proximity, SecurityBitsTarget, logup, maxConstraintDegree, whirQueryPhasePowBits, kWhir)
}

// AppParams is app_params_with_100_bits_security(h), for 11 ≤ h ≤ 24 (below 11 the builder makes
// no WHIR round).
func AppParams(logStackedHeight int) (SystemParams, error) {
	if logStackedHeight < minAppLogStackedHeight || logStackedHeight > MaxAppLogStackedHeight {
		return SystemParams{}, fmt.Errorf("log_stacked_height %d: must be in [%d, %d] for app-100bit",
			logStackedHeight, minAppLogStackedHeight, MaxAppLogStackedHeight)
	}
	return ParamsWith100BitsSecurity(DefaultAppLogBlowup, DefaultAppLSkip, satSub(logStackedHeight, DefaultAppLSkip),
		2048, 5, 15, UniqueDecoding(), AppMaxConstraintDegree, DefaultWhirQueryPhasePowBits, DefaultKWhir), nil
}

// LeafParams is leaf_params_with_100_bits_security.
func LeafParams() SystemParams {
	return ParamsWith100BitsSecurity(DefaultLeafLogBlowup, 4, 17, 2048, 4, 13, UniqueDecoding(),
		RecursionMaxConstraintDegree, DefaultWhirQueryPhasePowBits, DefaultKWhir)
}

// InternalParams is internal_params_with_100_bits_security.
func InternalParams() SystemParams {
	return ParamsWith100BitsSecurity(DefaultInternalLogBlowup, 2, 17, 512, 18, 20, ListDecoding(2),
		RecursionMaxConstraintDegree, DefaultWhirQueryPhasePowBits, DefaultKWhir)
}

// RootParams is root_params_with_100_bits_security.
func RootParams() SystemParams {
	return ParamsWith100BitsSecurity(DefaultRootLogBlowup, 2, 18, 18, 15, 15, ListDecoding(1),
		RecursionMaxConstraintDegree, 15, DefaultKWhir)
}

// HookParams is hook_params_with_100_bits_security.
func HookParams() SystemParams {
	return ParamsWith100BitsSecurity(DefaultHookLogBlowup, 2, 18, 80, 12, 11, ListDecoding(1),
		RecursionMaxConstraintDegree, DefaultWhirQueryPhasePowBits, DefaultKWhir)
}

// OpenVMKeccakfLogStackedHeight is the stacked height of OpenVM's GPU Keccak-f example.
const OpenVMKeccakfLogStackedHeight = 21

// OpenVMKeccakfParams are the parameters of OpenVM's own GPU Keccak-f example (stark-backend
// v2.0.1, crates/cuda-backend/examples/keccakf.rs, make_params): app_params_with_100_bits_security(21),
// i.e. l_skip 4, n_stack 17, w_stack 2048, log_blowup 1, WHIR k 4 with log_final_poly_len 9
// (derived from the maximum 10), query PoW 20, folding PoW 5, μ PoW 15, unique decoding, LogUp
// 100-bit (PoW 18), a 100-bit target. The example's older revisions (before v2.0.0-beta.1) used
// w_stack 64 and log_final_poly_len 8 with an earlier WhirConfig; see docs/SPEC-NOTES.md.
func OpenVMKeccakfParams() SystemParams {
	p, err := AppParams(OpenVMKeccakfLogStackedHeight)
	if err != nil {
		panic(err) // 21 is in range
	}
	return p
}

// TestParamsSmall is test_system_params_small(l_skip, n_stack, k) of OpenVM test_utils: 5-bit
// security target, insecure by design, for fast tests.
func TestParamsSmall(lSkip, nStack, kWhir int) SystemParams {
	return NewSystemParams(testLogBlowup, lSkip, nStack, testWStack, (lSkip+nStack)%kWhir, 2, 3,
		SplitUniqueList(3, 1), testSecurityBits,
		LogUpSecurityParameters{MaxInteractionCount: testLogupMaxInteractionCount, LogMaxMessageLength: 7, PowBits: 2},
		3, 1, kWhir)
}

// PresetInfo describes a preset.
type PresetInfo struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	// SecurityBits is the target the preset was built for (and is checked against).
	SecurityBits int `json:"security_bits"`
	// Bounds are the circuit bounds used to evaluate soundness when no verifying key is given.
	Bounds Bounds `json:"bounds"`
}

type preset struct {
	info  PresetInfo
	build func(h int) (SystemParams, error)
}

func fixed(p func() SystemParams) func(int) (SystemParams, error) {
	return func(int) (SystemParams, error) { return p(), nil }
}

var presets = []preset{
	{PresetInfo{"app-100bit", "app_params_with_100_bits_security(log_stacked_height): App VM, 100-bit target",
		SecurityBitsTarget, AppVMBounds}, AppParams},
	{PresetInfo{"openvm-keccakf", "the parameters of OpenVM's GPU Keccak-f example (stark-backend v2.0.1 cuda-backend/examples/keccakf.rs): app_params_with_100_bits_security(21), 100-bit target",
		SecurityBitsTarget, AppVMBounds}, fixed(OpenVMKeccakfParams)},
	{PresetInfo{"leaf", "leaf_params_with_100_bits_security: leaf aggregation, 100-bit target",
		SecurityBitsTarget, recursionBounds("leaf recursion bounds", 20)}, fixed(LeafParams)},
	{PresetInfo{"internal", "internal_params_with_100_bits_security: internal aggregation, 100-bit target",
		SecurityBitsTarget, recursionBounds("internal recursion bounds", 19)}, fixed(InternalParams)},
	{PresetInfo{"root", "root_params_with_100_bits_security: root circuit, 100-bit target",
		SecurityBitsTarget, recursionBounds("root recursion bounds", 21)}, fixed(RootParams)},
	{PresetInfo{"hook", "hook_params_with_100_bits_security: deferral hook circuit, 100-bit target",
		SecurityBitsTarget, recursionBounds("hook recursion bounds", 20)}, fixed(HookParams)},
	{PresetInfo{"test", "test_system_params_small(2, 8, 3) (OpenVM default_test_params_small): INSECURE 5-bit target, for fast tests",
		testSecurityBits, AppVMBounds}, fixed(func() SystemParams { return TestParamsSmall(testLSkip, testNStack, testKWhir) })},
}

// PresetNames lists the preset names in display order.
func PresetNames() []string {
	names := make([]string, len(presets))
	for i, p := range presets {
		names[i] = p.info.Name
	}
	return names
}

// Preset returns the named preset. logStackedHeight is used by app-100bit only.
func Preset(name string, logStackedHeight int) (SystemParams, PresetInfo, error) {
	i := slices.IndexFunc(presets, func(p preset) bool { return p.info.Name == name })
	if i < 0 {
		return SystemParams{}, PresetInfo{}, fmt.Errorf("preset %q: must be one of %s", name, strings.Join(PresetNames(), ", "))
	}
	p, err := presets[i].build(logStackedHeight)
	if err != nil {
		return SystemParams{}, PresetInfo{}, err
	}
	return p, presets[i].info, nil
}
