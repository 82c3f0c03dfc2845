package cuda

import (
	"errors"
	"testing"
	"time"
)

// A module build registered as running makes others wait for it; what Prebuild built is handed,
// with its compile time, to the first taker only; a failed build is no answer (its error is
// returned to the waiter, and nothing is recorded as built).
func TestFlights(t *testing.T) {
	fs := &flights{}
	if err := fs.wait("k"); err != nil {
		t.Fatalf("wait with nothing running: %v", err)
	}
	f := fs.start("k")
	if f == nil || fs.start("k") != nil {
		t.Fatal("a second build of a running module was registered")
	}
	waited := make(chan error)
	go func() { waited <- fs.wait("k") }()
	select {
	case err := <-waited:
		t.Fatalf("wait returned (%v) before the build finished", err)
	case <-time.After(20 * time.Millisecond):
	}
	fs.finish("k", f, nil, true, 3*time.Second)
	if err := <-waited; err != nil {
		t.Fatalf("wait: %v", err)
	}
	if d, ok := fs.take("k"); !ok || d != 3*time.Second {
		t.Fatalf("take: %v %v, want 3s true", d, ok)
	}
	if _, ok := fs.take("k"); ok {
		t.Fatal("a module built ahead was taken twice")
	}
	// A BuildModules's own build (ahead false) is not recorded; a failed one neither.
	f = fs.start("b")
	fs.finish("b", f, nil, false, time.Second)
	bad := errors.New("nvrtc: broken")
	f = fs.start("c")
	go fs.finish("c", f, bad, true, time.Second)
	if err := fs.wait("c"); err != nil && !errors.Is(err, bad) {
		t.Fatalf("wait on a failed build: %v", err)
	}
	<-f.done
	for _, k := range []string{"b", "c"} {
		if _, ok := fs.take(k); ok {
			t.Errorf("%s recorded as built ahead", k)
		}
	}
	if fs.start("c") == nil {
		t.Error("a failed build still counts as running")
	}
	fs.finish("a", fs.start("a"), nil, true, time.Second)
	fs.forget()
	if _, ok := fs.take("a"); ok {
		t.Error("forget kept a module built ahead")
	}
}
