package gpu

import (
	"github.com/metalprove/metalprove/internal/gpu/cuda"
	"github.com/metalprove/metalprove/internal/gpu/driver"
)

func init() {
	register(KindCUDA, func(o Options) (driver.Backend, error) {
		return cuda.Open(cuda.Options{CacheDir: o.CacheDir, Device: o.Ordinal, Logger: o.Logger})
	})
	counters[KindCUDA] = cuda.DeviceCount
	prebuilders[KindCUDA] = func(o Options, ms []driver.ModuleSource) ([]driver.ModuleBuild, error) {
		return cuda.Prebuild(cuda.Options{CacheDir: o.CacheDir, Device: o.Ordinal, Logger: o.Logger}, ms)
	}
}
