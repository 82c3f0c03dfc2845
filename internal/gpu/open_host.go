package gpu

import (
	"github.com/metalprove/metalprove/internal/gpu/driver"
	"github.com/metalprove/metalprove/internal/gpu/host"
)

func init() {
	register(KindHost, func(o Options) (driver.Backend, error) {
		return host.OpenOptions(host.Options{Threads: o.HostThreads, ISA: o.HostISA})
	})
}
