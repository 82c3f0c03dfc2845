// Package prover is the app layer between the commands (internal/cmd/...) and the protocol
// (internal/stark): what several commands share, so that no command imports another. It owns
// the parameters a command runs with (ResolveParams: a preset, the config file's params section,
// a proof file's preset), the statement of a trace file (its section headers read once, each
// section's AIR, the cells read into proving inputs, keygen while they are read), the checks
// that refuse what cannot fit before anything is allocated (the machine's memory, the device's),
// the one way to open a device and a backend on it (honouring --device-memory), the exit status
// of proving errors (ProveError), the per-stage reporting of proofs (StageWatch, StageRow) and
// the proof-file and trace-file helpers of verify, vk and proof export.
//
// It imports the protocol, the backends, the examples and cmdutil (typed errors, settings);
// nothing here imports a command.
package prover
