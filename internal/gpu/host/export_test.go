package host

// Test hooks.
var (
	CTable            = cTable
	SetUcontextFibers = setUcontextFibers
)

// ForgetModules drops the libraries this process has loaded from its table (they stay mapped),
// so that the next build reads the disk cache.
func ForgetModules() {
	libMu.Lock()
	libs = map[string]*moduleLib{}
	libMu.Unlock()
}

// DecodeEntry decodes a module cache file's bytes.
var DecodeEntry = decodeEntry
