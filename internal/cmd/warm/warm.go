// Package warm implements `metalprove warm`: its flags and the printing of the report (text, or
// --json). Building a proving key's constraint kernels on a device ahead of the first proof is
// the app layer's: prover.Warm.
package warm

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/metalprove/metalprove/internal/cmdutil"
	"github.com/metalprove/metalprove/internal/prover"
)

// Options are the inputs of warm: the request its flags make, and how to print.
type Options struct {
	IO *cmdutil.IOStreams
	prover.WarmRequest
	JSON bool
}

// NewCmdWarm returns the warm command. runF, when not nil, replaces warmRun (for tests).
func NewCmdWarm(f *cmdutil.Factory, runF func(*Options) error) *cobra.Command {
	opts := &Options{IO: f.IO, WarmRequest: prover.WarmRequest{Logger: &f.Logger, Settings: f.Settings}}
	cmd := &cobra.Command{
		Use:   "warm --key PK",
		Short: "Compile a proving key's constraint kernels for the device, ahead of the first proof",
		Long: `Compile the constraint kernels of every AIR of a proving key (metalprove keygen) for the
device (--device; CUDA: the GPU of --gpu) and cache them, so that the first proof with the key
does not pay the compile: a service runs it when it is deployed. On GPUs round 0 of the
constraint sumcheck runs code generated from each AIR's constraints, compiled at run time (CUDA:
NVRTC, units compiled side by side on the host's cores and linked; Metal: the run-time compiler)
and cached by the code's digest, the GPU architecture and the compiler version (CUDA:
$XDG_CACHE_HOME/metalprove/cuda, else ~/.cache/metalprove/cuda; a damaged entry is detected and
rebuilt). A later warm or proof with the same key finds the kernels in the cache. The host
device interprets the constraint programs: there is nothing to compile, and warm says so.

Exit status: 0 on success; 2 for bad flags (a key below 100 bits without --allow-insecure); 3
for a malformed or unsupported key; 5 when the device cannot be opened or a compile fails.`,
		Example: `  metalprove keygen --example keccakf -o keccakf.pk
  metalprove warm --key keccakf.pk --device cuda`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if opts.Key == "" {
				return cmdutil.Usagef("--key is required")
			}
			if opts.Ordinal < 0 {
				return cmdutil.Usagef("--gpu %d: a GPU index is 0 or more", opts.Ordinal)
			}
			opts.Progress = f.Progress
			if runF != nil {
				return runF(opts)
			}
			return warmRun(opts)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&opts.Key, "key", "", "proving-key file (metalprove keygen)")
	fl.IntVar(&opts.Ordinal, "gpu", 0, "which GPU (CUDA ordinal, after CUDA_VISIBLE_DEVICES)")
	fl.BoolVar(&opts.AllowInsecure, "allow-insecure", false, "accept a key whose parameters have a security target below 100 bits")
	fl.BoolVar(&opts.JSON, "json", false, "print one JSON object")
	f.JSONOnFailure(cmd, &opts.JSON)
	return cmd
}

// warmRun builds the kernels through prover.Warm and prints its report.
func warmRun(opts *Options) error {
	rep, err := prover.Warm(opts.WarmRequest)
	if err != nil {
		return err
	}
	if opts.JSON {
		enc := json.NewEncoder(opts.IO.Out)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	if rep.Note != "" {
		_, err = fmt.Fprintf(opts.IO.Out, "%s: %s\n", rep.Key, rep.Note)
		return err
	}
	var lines []string
	for _, a := range rep.AIRs {
		how := "from the cache"
		if a.Compiled {
			how = fmt.Sprintf("compiled in %.2f s", a.ElapsedMS/1e3)
		}
		lines = append(lines, fmt.Sprintf("  %s: %d pieces, %d instructions in %d units, %s", a.AIR, a.Pieces, a.Instructions, a.Units, how))
	}
	cache := ""
	if len(rep.AIRs) > 0 && rep.AIRs[0].Cache != "" {
		cache = "; cached in " + dirOf(rep.AIRs[0].Cache)
	}
	_, err = fmt.Fprintf(opts.IO.Out, "%s: constraint kernels of %d AIRs ready on %s in %.2f s%s\n%s\n",
		rep.Key, len(rep.AIRs), rep.Device, rep.ElapsedMS/1e3, cache, strings.Join(lines, "\n"))
	return err
}

// dirOf is the directory of a cache file.
func dirOf(p string) string {
	if i := strings.LastIndexByte(p, '/'); i > 0 {
		return p[:i]
	}
	return p
}
