package driver

// The kernel table (kernels.gen.go) and the per-target copies of shaders/*.metal
// (internal/gpu/host/kernels_host.gen.cpp, internal/gpu/cuda/kernels.gen.cu,
// internal/gpu/metal/shaders.gen.metal) are generated from the shaders by scripts/mslgen.

//go:generate go run ../../../scripts/mslgen
