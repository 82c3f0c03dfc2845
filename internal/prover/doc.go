// Package prover is the app layer between the commands (internal/cmd/...) and the protocol
// (internal/stark): the work of keygen, prove, verify and the exports, as library functions a
// service could call without cobra, and what several commands share, so that no command imports
// another. Commands keep their flags, the checks of flag conflicts and the printing; they fill a
// request and print the report they get back.
//
// It owns the orchestration of the commands: Prove (prove: parameters or a proving key, the
// output created before any work, the backend opened and the key made while the cells are read,
// the memory checks, stark.Prove with its stages reported, the proof file written atomically),
// Verify (verify: a proof file or bare OpenVM bytes, the AIRs from metadata, a trace file or a
// key, keygen or the key's verifying key, stark.Verify), Keygen (keygen: a proving-key file from
// built-in AIRs or OpenVM's verifying key), ExportVK (vk export) and ExportProof (proof export),
// each with its request and its report (the JSON the command prints).
//
// Under them: the parameters a command runs with (ResolveParams: a preset, the config file's
// params section, a proof file's preset), the statement of a trace file (its section headers
// read once, each section's AIR, the cells read into proving inputs, keygen while they are read),
// proving keys (read, checked against a trace, imported), the checks that refuse what cannot fit
// before anything is allocated (the machine's memory, the device's), the one way to open a device
// and a backend on it (honouring --device-memory), the exit status of proving errors
// (ProveError), the per-stage reporting of proofs (StageWatch, StageRow) and the proof-file and
// trace-file helpers.
//
// It imports the protocol, the backends, the examples and cmdutil (typed errors of the exit
// status, settings, atomic outputs); nothing here imports a command.
package prover
