// Package resident is the resident prover's Unix socket: the server that `metalprove serve` runs
// (Serve: one request a connection, each proved through the app layer, prover.Prove, on one
// prover.Resident, a device kept open with the proving keys it made), and the client that
// `metalprove prove --socket` uses (Prove). A process that opens a CUDA device pays ≈ 300 ms for
// the driver and its context before any work; a proof handed to a resident prover pays only its
// trace's read, its upload and its stages.
//
// The protocol (internal/resident/wire, version 1), one JSON object a line: the client sends a
// Request (its paths absolute, its parameters resolved from its own flags and config file); the
// server answers with any number of Responses carrying the proof's log records (at the level the
// request names), then one carrying the report or the error with its exit status. The server writes the
// proof file itself, atomically, where the request says; a client that hangs up cancels its
// proof, which then leaves no file. Both ends run as the same user: the socket is made with
// mode 0600.
//
// It sits in the app layer beside internal/prover and internal/farm; nothing here imports a
// command.
package resident
