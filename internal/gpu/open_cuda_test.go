package gpu

import (
	"bytes"
	"errors"
	"os"
	"strings"
	"testing"
)

// TestOpenCUDA: where CUDA is missing, an explicit cuda Open fails with ErrUnavailable saying
// what is missing and auto does not fail because of it; where a device is present (or
// METALPROVE_REQUIRE_CUDA=1), the device opens and moves bytes.
func TestOpenCUDA(t *testing.T) {
	d, err := Open(KindCUDA, Options{CacheDir: t.TempDir()})
	if err != nil {
		t.Logf("cuda: %v", err)
		if os.Getenv("METALPROVE_REQUIRE_CUDA") != "" {
			t.Fatal("METALPROVE_REQUIRE_CUDA is set")
		}
		if !errors.Is(err, ErrUnavailable) {
			t.Fatalf("%v does not match ErrUnavailable", err)
		}
		msg := err.Error()
		if !strings.Contains(msg, "libcuda.so.1 not found") && !strings.Contains(msg, "no CUDA device") &&
			!strings.Contains(msg, "libnvrtc not found") && !strings.Contains(msg, "CUDA") {
			t.Errorf("message does not say what is missing: %q", msg)
		}
		auto, err := Open(KindAuto, Options{CacheDir: t.TempDir()})
		if err != nil {
			// the host backend is not registered in this build: the error carries the CUDA reason
			if !strings.Contains(err.Error(), "cuda: ") {
				t.Errorf("auto: %v", err)
			}
			t.Logf("auto: %v", err)
			return
		}
		defer auto.Close()
		if auto.Kind() == KindCUDA || !strings.Contains(auto.FallbackReason(), "cuda: ") {
			t.Errorf("auto chose %s, fallback reason %q", auto.Kind(), auto.FallbackReason())
		}
		return
	}
	defer d.Close()
	t.Logf("cuda device: %s, limits %+v", d.Name(), d.Limits())
	b, err := d.Alloc("roundtrip", 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	src := bytes.Repeat([]byte("metalprove"), 1000)
	if err := d.Upload(b, 123, src); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, len(src))
	if err := d.Download(got, b, 123); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, src) {
		t.Fatal("round trip differs")
	}
	if _, err := d.Alloc("huge", 1<<40); !errors.Is(err, ErrOutOfMemory) {
		t.Errorf("huge alloc: %v", err)
	}
}
