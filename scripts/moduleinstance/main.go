// Command moduleinstance writes a module template (a CUDA copy, kernels_NAME.gen.cu) completed
// with the generated code of an AIR, as the CUDA backend compiles it but in one source
// (driver.Combined: the units, then the main code), for scripts/check-msl.sh to compile with
// clang: the template with real generated code, not only its placeholder. With -whole the code is
// the AIR's whole program (piececode.Whole, the whole template's).
//
//	moduleinstance -template internal/gpu/cuda/kernels_pieces.gen.cu -air keccakf -o out.cu
//	moduleinstance -template internal/gpu/cuda/kernels_whole.gen.cu -air fibonacci -whole -o out.cu
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/metalprove/metalprove/examples/keccakf"
	"github.com/metalprove/metalprove/internal/air"
	"github.com/metalprove/metalprove/internal/air/testair"
	"github.com/metalprove/metalprove/internal/constraints"
	"github.com/metalprove/metalprove/internal/gpu/driver"
	"github.com/metalprove/metalprove/internal/kernels/piececode"
)

func main() {
	tmpl := flag.String("template", "", "module template file")
	name := flag.String("air", "keccakf", "AIR: keccakf or fibonacci")
	out := flag.String("o", "", "output file")
	whole := flag.Bool("whole", false, "the whole program's code (the whole template) instead of pieces")
	flag.Parse()
	if err := run(*tmpl, *name, *out, *whole); err != nil {
		fmt.Fprintln(os.Stderr, "moduleinstance:", err)
		os.Exit(1)
	}
}

func run(tmplPath, name, out string, whole bool) error {
	var a air.Air
	switch name {
	case "keccakf":
		a = keccakf.Air{}
	case "fibonacci":
		a = testair.FibonacciAir{}
	default:
		return fmt.Errorf("-air %q: keccakf or fibonacci", name)
	}
	tmpl, err := os.ReadFile(tmplPath)
	if err != nil {
		return err
	}
	vk, err := air.Keygen(a, 255, false, nil)
	if err != nil {
		return err
	}
	if whole {
		pg, err := constraints.Compile(vk, constraints.All)
		if err != nil {
			return err
		}
		code, err := piececode.Whole(pg, name)
		if err != nil {
			return err
		}
		src, err := driver.Instantiate(string(tmpl), code)
		if err != nil {
			return err
		}
		return os.WriteFile(out, []byte(src), 0o644)
	}
	ps, err := constraints.Split(vk, constraints.All, constraints.DevicePieces)
	if err != nil {
		return err
	}
	us, err := piececode.Units(ps, name)
	if err != nil {
		return err
	}
	main, err := piececode.Main(us, len(ps), name)
	if err != nil {
		return err
	}
	units := make([]string, len(us))
	for i, u := range us {
		units[i] = u.Code
	}
	src, err := driver.Combined(string(tmpl), units, main)
	if err != nil {
		return err
	}
	return os.WriteFile(out, []byte(src), 0o644)
}
