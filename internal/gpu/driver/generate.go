package driver

// The kernel table (kernels.gen.go), the typed launchers (internal/kernels/dispatch.gen.go), the
// per-target copies of shaders/*.metal (internal/gpu/host/kernels_host*.gen.{h,cpp},
// internal/gpu/cuda/kernels.gen.cu, internal/gpu/metal/shaders.gen.metal) and the module templates
// (module_NAME.gen.cpp, kernels_NAME.gen.cu, module_NAME.gen.metal) are generated from the shaders
// by scripts/mslgen. Nothing generated depends on an AIR: an AIR's constraint code is generated at
// run time (internal/kernels/piececode) and compiled into modules built from the templates.

//go:generate go run ../../../scripts/mslgen
