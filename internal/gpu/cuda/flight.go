package cuda

import (
	"sync"
	"time"
)

// flights are the module builds of this process by module cache key: a build running (Prebuild
// or BuildModules), which a BuildModules of the same module waits for rather than compiling it
// again, and the modules Prebuild built that no backend has taken yet, so that the first
// BuildModules to take one reports it as compiled (with the compile's time), not as cached.
type flights struct {
	mu      sync.Mutex
	running map[string]*flight
	ahead   map[string]time.Duration
}

// flight is one module build: done is closed when err (or the image, which the builder has put
// in imagesByKey first) is known.
type flight struct {
	done chan struct{}
	err  error
}

// modFlights are this process's module builds.
var modFlights = &flights{}

// start registers a build of key and returns it; nil when one is running already (the caller
// then builds without registering: the compiles of its parts are shared, compileOnce).
func (fs *flights) start(key string) *flight {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if fs.running[key] != nil {
		return nil
	}
	if fs.running == nil {
		fs.running = map[string]*flight{}
	}
	f := &flight{done: make(chan struct{})}
	fs.running[key] = f
	return f
}

// finish ends build f of key with err; ahead (err nil) records that Prebuild built it in elapsed.
// The builder stores the image (imagesByKey) before it calls finish.
func (fs *flights) finish(key string, f *flight, err error, ahead bool, elapsed time.Duration) {
	fs.mu.Lock()
	if fs.running[key] == f {
		delete(fs.running, key)
	}
	if ahead && err == nil {
		if fs.ahead == nil {
			fs.ahead = map[string]time.Duration{}
		}
		fs.ahead[key] = elapsed
	}
	fs.mu.Unlock()
	f.err = err
	close(f.done)
}

// wait waits for the build of key running now, if any, and returns its error (nil: none was
// running, or it succeeded).
func (fs *flights) wait(key string) error {
	fs.mu.Lock()
	f := fs.running[key]
	fs.mu.Unlock()
	if f == nil {
		return nil
	}
	<-f.done
	return f.err
}

// take returns how long Prebuild took to build key and forgets it; ok is false when Prebuild did
// not build it, or a backend has taken it already.
func (fs *flights) take(key string) (elapsed time.Duration, ok bool) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	elapsed, ok = fs.ahead[key]
	delete(fs.ahead, key)
	return elapsed, ok
}

// forget drops the record of the modules built ahead (tests that act as a new process).
func (fs *flights) forget() {
	fs.mu.Lock()
	clear(fs.ahead)
	fs.mu.Unlock()
}
