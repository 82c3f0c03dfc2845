package cmd

import (
	"github.com/spf13/cobra"

	"github.com/metalprove/metalprove/internal/cmd/bench"
	"github.com/metalprove/metalprove/internal/cmd/fetch"
	"github.com/metalprove/metalprove/internal/cmd/jobs"
	"github.com/metalprove/metalprove/internal/cmd/keygen"
	"github.com/metalprove/metalprove/internal/cmd/params"
	"github.com/metalprove/metalprove/internal/cmd/proof"
	"github.com/metalprove/metalprove/internal/cmd/prove"
	"github.com/metalprove/metalprove/internal/cmd/selftest"
	"github.com/metalprove/metalprove/internal/cmd/serve"
	"github.com/metalprove/metalprove/internal/cmd/submit"
	"github.com/metalprove/metalprove/internal/cmd/trace"
	"github.com/metalprove/metalprove/internal/cmd/verify"
	"github.com/metalprove/metalprove/internal/cmd/version"
	"github.com/metalprove/metalprove/internal/cmd/vk"
	"github.com/metalprove/metalprove/internal/cmd/warm"
	"github.com/metalprove/metalprove/internal/cmd/worker"
	"github.com/metalprove/metalprove/internal/cmdutil"
)

// subcommands lists the commands of metalprove, in help order. Each lives in its own package
// under internal/cmd/<name> with an Options struct, NewCmdX(f, runF) and a run function.
func subcommands(f *cmdutil.Factory) []*cobra.Command {
	return []*cobra.Command{
		bench.NewCmdBench(f, nil),
		fetch.NewCmdFetch(f, nil),
		jobs.NewCmdJobs(f, nil),
		keygen.NewCmdKeygen(f, nil),
		params.NewCmdParams(f, nil),
		proof.NewCmdProof(f, nil),
		prove.NewCmdProve(f, nil),
		selftest.NewCmdSelftest(f, nil),
		serve.NewCmdServe(f, nil),
		submit.NewCmdSubmit(f, nil),
		trace.NewCmdTrace(f, nil),
		verify.NewCmdVerify(f, nil),
		version.NewCmdVersion(f, nil),
		vk.NewCmdVK(f, nil),
		warm.NewCmdWarm(f, nil),
		worker.NewCmdWorker(f, nil),
	}
}
