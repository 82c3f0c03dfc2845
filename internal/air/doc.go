// Package air owns the AIR description layer of metalprove: symbolic expressions and variables
// (spec B §1.2), the Go builder API in which AIRs are written (mirroring the Plonky3 0.4.3 /
// OpenVM v2.0.1 builder helpers tree for tree, B §1.3–§1.4), the constraint DAG built at keygen
// (B §1.5, `build_symbolic_constraints_dag`), and a host constraint / interaction checker used to
// validate traces before proving, and keygen (per-AIR verifying key, trace-height constraints, the
// vk postcard and its prehash, B §1.6–§1.8; the preprocessed commitment is supplied by the caller).
// The test AIRs of B §8 live in package testair; this package's tests that use them are in the
// external test package air_test.
package air
