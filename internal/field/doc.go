// Package field owns BabyBear arithmetic in Go: the prime field Fp (p = 2^31 − 2^27 + 1 =
// 2013265921 = 0x78000001) and its quartic extension Fp4 = Fp[X]/(X^4 − 11).
//
// Representation: an Fp is a uint32 holding the canonical value in [0, p). Every exported
// function keeps that invariant, so the bits of an Fp are its wire encoding, its transcript
// value and the value Poseidon2 sees; nothing needs converting at a boundary. (The GPU
// kernels may use Montgomery form internally; they convert at their own boundary.) An Fp4 is
// the coefficient array [c0, c1, c2, c3] meaning c0 + c1·X + c2·X^2 + c3·X^3, the order used by
// the transcript, hashing and the proof codec (spec A §1.3).
//
// Wire format: canonical little-endian u32 per base element, four of them per extension element.
// Decoding rejects a value ≥ p with an error; it never reduces silently.
//
// Values outside [0, p) can only be made through a conversion such as Fp(x); use New to reduce
// an arbitrary integer or FromCanonical to validate one. Arithmetic is not constant time.
package field
