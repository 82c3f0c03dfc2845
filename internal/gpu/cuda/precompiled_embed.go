//go:build cudafatbin

package cuda

import (
	_ "embed"
	"strings"
)

// Built by `make cuda` (scripts/build-fatbin.sh); both files are ignored by git.
//
//go:embed kernels.fatbin
var fatbin []byte

//go:embed kernels.fatbin.sha256
var fatbinSource string

func init() {
	precompiled = fatbin
	precompiledSource = strings.Fields(fatbinSource + " ")[0]
}
