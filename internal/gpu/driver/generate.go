package driver

// The kernel table (kernels.gen.go) and the per-target copies of shaders/*.metal
// (internal/gpu/host/kernels_host.gen.cpp, internal/gpu/cuda/kernels.gen.cu,
// internal/gpu/metal/shaders.gen.metal) are generated from the shaders by scripts/mslgen, after
// scripts/piecegen has written the generated piece code they include
// (shaders/include/<air>_pieces.h, internal/kernels/pieces.gen.go).

//go:generate go run ../../../scripts/piecegen
//go:generate go run ../../../scripts/mslgen
