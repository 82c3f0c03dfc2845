// Package stark owns the SWIRL proof system as a protocol: the proof types and their binary
// codec, the stage code of the prover (transcript order, what is sent) written once against the
// Backend interface, and the verifier. Heavy operations are Backend methods: internal/backend/cpuref
// implements them in plain Go, the device backend on a gpu.Device. Parameters live in the
// subpackage params.
package stark
