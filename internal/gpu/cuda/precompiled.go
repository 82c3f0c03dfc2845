package cuda

import (
	"crypto/sha256"
	"encoding/hex"
)

// precompiled is the fatbin that `make cuda` builds from kernels.gen.cu with nvcc
// (scripts/build-fatbin.sh) and embeds with the build tag cudafatbin (precompiled_embed.go);
// precompiledSource is the SHA-256 (hex) of the kernels.gen.cu it was built from. Without the
// tag both are empty and the kernels are compiled by NVRTC at first use.
var (
	precompiled       []byte
	precompiledSource string
)

// sourceHash is the hex SHA-256 of a CUDA source, as scripts/build-fatbin.sh records it.
func sourceHash(src string) string {
	h := sha256.Sum256([]byte(src))
	return hex.EncodeToString(h[:])
}
