// A separate module so that gnark-crypto, needed only to benchmark our host device against it,
// is not a dependency of metalprove (and does not raise its minimum Go version).
module github.com/metalprove/metalprove/internal/kernels/gnarkbench

go 1.26.8

require github.com/metalprove/metalprove v0.0.0

require (
	github.com/bits-and-blooms/bitset v1.25.0 // indirect
	github.com/consensys/gnark-crypto v0.22.0
	github.com/mattn/go-colorable v0.1.14 // indirect
	github.com/mattn/go-isatty v0.0.22 // indirect
	github.com/rs/zerolog v1.35.1 // indirect
	go.yaml.in/yaml/v3 v3.0.5 // indirect
	golang.org/x/crypto v0.57.0 // indirect
	golang.org/x/sys v0.48.0 // indirect
)

replace github.com/metalprove/metalprove => ../../..
