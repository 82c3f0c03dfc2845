package device_test

import (
	"fmt"
	"math/rand/v2"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/metalprove/metalprove/internal/air/testair"
	"github.com/metalprove/metalprove/internal/backend/cpuref"
	"github.com/metalprove/metalprove/internal/backend/device"
	"github.com/metalprove/metalprove/internal/field"
	"github.com/metalprove/metalprove/internal/field/fieldrand"
	"github.com/metalprove/metalprove/internal/gpu"
	"github.com/metalprove/metalprove/internal/gpu/driver"
	"github.com/metalprove/metalprove/internal/gpu/host"
	"github.com/metalprove/metalprove/internal/kernels"
	"github.com/metalprove/metalprove/internal/params"
	"github.com/metalprove/metalprove/internal/stark"
)

// timedDriver is the host device with the wall time of each kernel's dispatches recorded (host
// dispatches run to completion before they return).
type timedDriver struct {
	*host.Backend
	mu    sync.Mutex
	times map[string]time.Duration
	count map[string]int
}

func (d *timedDriver) Dispatch(k *driver.KernelInfo, groups, tpg driver.Dim3, args []driver.Arg, tgLen []uint32) error {
	t0 := time.Now()
	err := d.Backend.Dispatch(k, groups, tpg, args, tgLen)
	d.mu.Lock()
	d.times[k.Name] += time.Since(t0)
	d.count[k.Name]++
	d.mu.Unlock()
	return err
}

// BenchmarkGkrProver runs the GKR prover calls of one proof (ProveGkr's sequence, random
// challenges) for interaction-pair with 2^n sender rows and 2^(n+1) receiver rows (app-100bit),
// on the host device and on cpuref, and reports the milliseconds per kind of call; on the host
// device also per kernel. n comes from GKR_BENCH_LOG_ROWS (default 16):
//
//	go test ./internal/backend/device -run '^$' -bench GkrProver -benchtime 1x
func BenchmarkGkrProver(b *testing.B) {
	n := envInt("GKR_BENCH_LOG_ROWS", 16)
	p, err := params.AppParams(n + 1)
	if err != nil {
		b.Fatal(err)
	}
	ins := testair.InteractionPair(1<<n, 1)
	b.Run(fmt.Sprintf("host/2^%d", n), func(b *testing.B) {
		hb, err := host.Open(0)
		if err != nil {
			b.Fatal(err)
		}
		td := &timedDriver{Backend: hb, times: map[string]time.Duration{}, count: map[string]int{}}
		dev, err := gpu.NewDevice(gpu.KindHost, td)
		if err != nil {
			b.Fatal(err)
		}
		defer dev.Close()
		be, err := device.New(dev, device.Options{})
		if err != nil {
			b.Fatal(err)
		}
		defer be.Close()
		st := setUp(b, be.Stages(), p, ins)
		copyBandwidth(b, dev)
		td.times, td.count = map[string]time.Duration{}, map[string]int{}
		stats := dev.Stats()
		benchGkr(b, p, st.in, func(l *stark.GkrLayout, alpha, beta field.Fp4) (stark.GkrProver, error) {
			return be.NewGkrProver(p, st.in, l, alpha, beta)
		})
		after := dev.Stats()
		names := make([]string, 0, len(td.times))
		for k := range td.times {
			names = append(names, k)
		}
		sort.Strings(names)
		for _, k := range names {
			b.Logf("%-26s %5d dispatches %9.2f ms", k, td.count[k]/b.N, float64(td.times[k].Microseconds())/1000/float64(b.N))
		}
		b.Logf("per proof: %d dispatches, %d syncs, %d B up, %d B down, peak %d B",
			(after.Dispatches-stats.Dispatches)/b.N, (after.Syncs-stats.Syncs)/b.N, (after.BytesToDevice-stats.BytesToDevice)/int64(b.N),
			(after.BytesFromDevice-stats.BytesFromDevice)/int64(b.N), after.MemoryPeak)
	})
	b.Run(fmt.Sprintf("cpuref/2^%d", n), func(b *testing.B) {
		st := setUp(b, cpuref.New(), p, ins)
		benchGkr(b, p, st.in, func(l *stark.GkrLayout, alpha, beta field.Fp4) (stark.GkrProver, error) {
			return cpuref.Backend{}.NewGkrProver(p, st.in, l, alpha, beta)
		})
	})
}

// copyBandwidth logs the rate of bench_copy over 64 MiB (32 MiB read, 32 MiB written), the
// ceiling the kernels' bytes are compared with.
func copyBandwidth(b *testing.B, dev *gpu.Device) {
	const n = 8 << 20
	src, err := gpu.AllocArray[uint32](dev, "copy src", n)
	if err != nil {
		b.Fatal(err)
	}
	defer src.Free()
	dst, err := gpu.AllocArray[uint32](dev, "copy dst", n)
	if err != nil {
		b.Fatal(err)
	}
	defer dst.Free()
	best := time.Duration(1 << 62)
	for range 5 {
		t0 := time.Now()
		bt := dev.Batch()
		if err := kernels.EncodeCopy(bt, dev, dst, src, n); err != nil {
			b.Fatal(err)
		}
		if err := bt.Wait(); err != nil {
			b.Fatal(err)
		}
		best = min(best, time.Since(t0))
	}
	b.Logf("bench_copy: 64 MiB moved in %.2f ms: %.2f GB/s", float64(best.Microseconds())/1000, float64(8*n)/best.Seconds()/1e9)
}

func benchGkr(b *testing.B, p params.SystemParams, in []*stark.AirInput, newProver func(*stark.GkrLayout, field.Fp4, field.Fp4) (stark.GkrProver, error)) {
	times := map[string]time.Duration{}
	timed := func(name string, f func() error) {
		t0 := time.Now()
		if err := f(); err != nil {
			b.Fatalf("%s: %v", name, err)
		}
		times[name] += time.Since(t0)
	}
	layout := gkrLayout(b, p, in)
	r := rand.New(rand.NewPCG(61, 62))
	b.ResetTimer()
	for range b.N {
		var g stark.GkrProver
		timed("new", func() (err error) { g, err = newProver(layout, fieldrand.Fp4(r), fieldrand.Fp4(r)); return err })
		timed("root", func() error { _, _, err := g.Root(); return err })
		var xi []field.Fp4
		for j := 1; j <= layout.NumLayers(); j++ {
			timed("begin", func() error { return g.BeginLayer(j, xi, fieldrand.Fp4(r)) })
			rho := make([]field.Fp4, j-1)
			for k := range rho {
				timed("round", func() error { _, err := g.Round(); return err })
				rho[k] = fieldrand.Fp4(r)
				timed("bind", func() error { return g.Bind(rho[k]) })
			}
			timed("claims", func() error { _, err := g.LayerClaims(); return err })
			xi = append([]field.Fp4{fieldrand.Fp4(r)}, rho...)
		}
		timed("release", func() error { g.Release(); return nil })
	}
	for name, d := range times {
		b.ReportMetric(float64(d.Microseconds())/1000/float64(b.N), name+"-ms")
	}
}
