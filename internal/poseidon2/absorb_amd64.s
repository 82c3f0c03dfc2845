// The duplex sponge's absorb on one Poseidon2-BabyBear-16 state with AVX-512 (absorb_amd64.go):
// the 16 elements in the 16 lanes of Z0, Montgomery form, element k in lane k.
//
// Registers: Z0 the state; Z28 the diagonal V of M_I; Z29 R² mod p; Z30 p⁻¹ mod 2³²; Z31 p;
// K2 lanes 0..7, K3 lane 0, K4 the even lanes; Z1..Z5 and Z16..Z19 values; Z20..Z25 the macros'
// temporaries. X15 (the zero register of Go's internal ABI) is not used.
// General registers: DI state, SI data, CX blocks, DX constants (absorbTables layout: 64 initial
// full-round constants, 13 partial-round constants, 64 final full-round constants, V, a zero;
// Montgomery form), BX x0 and AX the sum of lanes 1..15 in the partial rounds, R8..R13 scalar
// temporaries.

#include "textflag.h"

// MONT(a, b, dst): dst = a·b·2⁻³² mod p, lane by lane (a, b < p; dst < p; dst may be a or b).
// The 64-bit products of the even lanes and of the odd ones (shifted down), q = lo·p⁻¹ mod 2³²
// and q·p of each; the high words of both products gathered into every lane (the even lanes'
// from the odd words: VMOVSHDUP under K4), hi(a·b) − hi(q·p) ∈ (−p, p) (the low words are
// equal), brought into [0, p) by min(d, d + p) as unsigned words.
#define MONT(a, b, dst) \
	VPMULUDQ b, a, Z20; \
	VPSRLQ $32, a, Z21; \
	VPSRLQ $32, b, Z22; \
	VPMULUDQ Z22, Z21, Z23; \
	VPMULUDQ Z30, Z20, Z21; \
	VPMULUDQ Z30, Z23, Z22; \
	VPMULUDQ Z31, Z21, Z21; \
	VPMULUDQ Z31, Z22, Z22; \
	VMOVSHDUP Z20, K4, Z23; \
	VMOVSHDUP Z21, K4, Z22; \
	VPSUBD Z22, Z23, Z20; \
	VPADDD Z31, Z20, Z21; \
	VPMINUD Z21, Z20, dst

// ADDM(a, b, dst): dst = a + b mod p (a, b < p).
#define ADDM(a, b, dst) \
	VPADDD b, a, Z24; \
	VPSUBD Z31, Z24, Z25; \
	VPMINUD Z25, Z24, dst

// SBOX(x): x = x⁷ (x², x³ = x²·x, x⁴ = x²·x², x³·x⁴).
#define SBOX(x) \
	MONT(x, x, Z16); \
	MONT(Z16, x, Z17); \
	MONT(Z16, Z16, Z18); \
	MONT(Z17, Z18, x)

// EXTERNAL: Z0 = M_E·Z0. Per group of four y_i = 2x_i + 3x_{i+1} + x_{i+2} + x_{i+3} (indices
// within the group) = (a + r2 + r3) + (a + x_{i+1}) with a = x_i + x_{i+1}, then
// y_i + Σ_k y_{4k + i mod 4} = 2y_i + Σ_{k≥1} y_{4k + i mod 16}: three levels of additions each.
#define EXTERNAL \
	VPSHUFD $0x39, Z0, Z1; \
	VPSHUFD $0x4e, Z0, Z2; \
	VPSHUFD $0x93, Z0, Z3; \
	ADDM(Z0, Z1, Z4); \
	ADDM(Z2, Z3, Z5); \
	ADDM(Z4, Z5, Z5); \
	ADDM(Z4, Z1, Z4); \
	ADDM(Z5, Z4, Z0); \
	VSHUFI32X4 $0x39, Z0, Z0, Z1; \
	VSHUFI32X4 $0x4e, Z0, Z0, Z2; \
	VSHUFI32X4 $0x93, Z0, Z0, Z3; \
	ADDM(Z0, Z0, Z4); \
	ADDM(Z4, Z1, Z4); \
	ADDM(Z2, Z3, Z5); \
	ADDM(Z4, Z5, Z0)

// FULL(off): a full round with the 16 constants at off(DX).
#define FULL(off) \
	VMOVDQU32 off(DX), Z1; \
	ADDM(Z0, Z1, Z0); \
	SBOX(Z0); \
	EXTERNAL

// SMONT(a, b, dst): dst ≡ a·b·2⁻³² mod p on general registers, signed: a, b ∈ (−p, p) as 64-bit
// integers, dst ∈ (−p, p) (q = lo·p⁻¹ taken as a signed word: |a·b − q·p| < p² + 2³¹p < 2³²p);
// dst distinct from a and b; R8 clobbered. No correction step: the S-box's chain stays short.
#define SMONT(a, b, dst) \
	MOVQ a, dst; \
	IMULQ b, dst; \
	IMUL3L $-2013265919, dst, R8; \
	MOVLQSX R8, R8; \
	IMUL3Q $0x78000001, R8, R8; \
	SUBQ R8, dst; \
	SARQ $32, dst

// HSUM: AX = Σ of Z0's lanes mod p (Z1, Z2 clobbered).
#define HSUM \
	VSHUFI32X4 $0x4e, Z0, Z0, Z1; \
	ADDM(Z0, Z1, Z1); \
	VSHUFI32X4 $0xb1, Z1, Z1, Z2; \
	ADDM(Z1, Z2, Z1); \
	VPSHUFD $0x4e, Z1, Z2; \
	ADDM(Z1, Z2, Z1); \
	VPSHUFD $0xb1, Z1, Z2; \
	ADDM(Z1, Z2, Z1); \
	VMOVD X1, AX

// ADDS(a, b, t): a = a + b mod p on general registers (a, b < p; t clobbered).
#define ADDS(a, b, t) \
	ADDL b, a; \
	LEAL -2013265921(a), t; \
	CMPL a, $0x78000001; \
	CMOVLCC t, a

// SUBS(a, b, t): a = a − b mod p on general registers (a, b < p; t clobbered).
#define SUBS(a, b, t) \
	SUBL b, a; \
	LEAL 0x78000001(a), t; \
	CMOVLCS t, a

// PARTIAL(next): a partial round. On entry BX ≡ lane 0 plus the round's constant (in (−p, p),
// signed) and AX = the sum of lanes 1..15 (< p); on exit the same for the new state, with the
// constant at next(DX).
//   s = (x0 + c)⁷, S = part + s, y0 = part − s, y_i = S + V_i·x_i (i ≥ 1); the next round's
//   S-box input y0 + c' = (part + c') − s ∈ (−p, p), part + c' added before s is known.
#define PARTIAL(next) \
	MONT(Z28, Z0, Z19); \
	MOVL AX, R13; \
	ADDS(R13, next(DX), R9); \
	SMONT(BX, BX, R9); \
	SMONT(R9, BX, R10); \
	SMONT(R9, R9, R11); \
	SMONT(R10, R11, R12); \
	LEAQ 0x78000001(R12), R9; \
	TESTQ R12, R12; \
	CMOVQLT R9, R12; \
	MOVQ R13, BX; \
	SUBQ R12, BX; \
	MOVL AX, R9; \
	ADDS(R9, R12, R10); \
	MOVL AX, R11; \
	SUBS(R11, R12, R10); \
	VPBROADCASTD R9, Z1; \
	ADDM(Z19, Z1, Z0); \
	VPBROADCASTD R11, Z2; \
	VMOVDQA32 Z2, K3, Z0; \
	HSUM; \
	SUBS(AX, R11, R10)

// func absorbAVX512(state *[16]uint32, data *uint32, blocks int, tables *uint32)
TEXT ·absorbAVX512(SB), NOSPLIT, $0-32
	MOVQ state+0(FP), DI
	MOVQ data+8(FP), SI
	MOVQ blocks+16(FP), CX
	MOVQ tables+24(FP), DX

	MOVL $0x78000001, AX
	VPBROADCASTD AX, Z31
	MOVL $0x88000001, AX
	VPBROADCASTD AX, Z30
	MOVL $0x45dddde3, AX
	VPBROADCASTD AX, Z29
	VMOVDQU32 564(DX), Z28
	MOVW $0x00ff, AX
	KMOVW AX, K2
	MOVW $0x0001, AX
	KMOVW AX, K3
	MOVW $0x5555, AX
	KMOVW AX, K4

	VMOVDQU32 (DI), Z0
	MONT(Z0, Z29, Z0)

loop:
	TESTQ CX, CX
	JZ   done
	VMOVDQU (SI), Y1
	MONT(Z1, Z29, Z1)
	VMOVDQA32 Z1, K2, Z0

	EXTERNAL
	FULL(0)
	FULL(64)
	FULL(128)
	FULL(192)

	HSUM
	VMOVD X0, BX
	SUBS(AX, BX, R9)
	ADDS(BX, 256(DX), R9)
	PARTIAL(260)
	PARTIAL(264)
	PARTIAL(268)
	PARTIAL(272)
	PARTIAL(276)
	PARTIAL(280)
	PARTIAL(284)
	PARTIAL(288)
	PARTIAL(292)
	PARTIAL(296)
	PARTIAL(300)
	PARTIAL(304)
	PARTIAL(628)

	FULL(308)
	FULL(372)
	FULL(436)
	FULL(500)

	ADDQ $32, SI
	DECQ CX
	JMP  loop

done:
	// Out of Montgomery form: a·1·2⁻³².
	MOVL $1, AX
	VPBROADCASTD AX, Z1
	MONT(Z0, Z1, Z0)
	VMOVDQU32 Z0, (DI)
	VZEROUPPER
	RET

// func cpuidex(leaf, sub uint32) (a, b, c, d uint32)
TEXT ·cpuidex(SB), NOSPLIT, $0-24
	MOVL leaf+0(FP), AX
	MOVL sub+4(FP), CX
	CPUID
	MOVL AX, a+8(FP)
	MOVL BX, b+12(FP)
	MOVL CX, c+16(FP)
	MOVL DX, d+20(FP)
	RET

// func xgetbv0() (lo, hi uint32)
TEXT ·xgetbv0(SB), NOSPLIT, $0-8
	MOVL $0, CX
	XGETBV
	MOVL AX, lo+0(FP)
	MOVL DX, hi+4(FP)
	RET
