package host

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// The disk cache of built modules: one file per module, named by the SHA-256 of everything that
// shapes the library (cacheKey), holding
//
//	"MPHOST01" | 4 zero bytes | SHA-256(payload) | payload (the shared library)
//
// as the CUDA backend's cache does. A file that does not decode (a flipped byte, a truncated
// write) is deleted and the module compiled again: a library is dlopen'ed only from bytes whose
// digest was checked.
const cacheMagic = "MPHOST01"

const cacheHeader = len(cacheMagic) + 4 + sha256.Size

// CacheEnv names the environment variable that overrides the cache directory of the host
// device's modules when Options.CacheDir is empty (gpu.Open passes none): tests point it at a
// directory of their own.
const CacheEnv = "METALPROVE_HOST_CACHE"

// cacheKey hashes the module's sources (the template with the generated code, the units), the
// headers they include, the compiler's identity, the flags and the platform.
func cacheKey(sources []string, headers map[string]string, compilerID string, flags []string, goos, goarch string) string {
	h := sha256.New()
	field := func(s string) {
		fmt.Fprintf(h, "%d:", len(s))
		h.Write([]byte(s))
	}
	field(cacheMagic)
	field(goos + "/" + goarch)
	field(compilerID)
	for _, f := range flags {
		field(f)
	}
	for _, name := range sortedKeys(headers) {
		field(name)
		field(headers[name])
	}
	for _, src := range sources {
		field(src)
	}
	return hex.EncodeToString(h.Sum(nil))
}

func encodeEntry(payload []byte) []byte {
	sum := sha256.Sum256(payload)
	b := make([]byte, 0, cacheHeader+len(payload))
	b = append(b, cacheMagic...)
	b = append(b, 0, 0, 0, 0)
	b = append(b, sum[:]...)
	return append(b, payload...)
}

var errCorrupt = errors.New("corrupt cache entry")

func decodeEntry(b []byte) ([]byte, error) {
	if len(b) <= cacheHeader || string(b[:len(cacheMagic)]) != cacheMagic {
		return nil, errCorrupt
	}
	payload := b[cacheHeader:]
	sum := sha256.Sum256(payload)
	if !bytes.Equal(sum[:], b[len(cacheMagic)+4:cacheHeader]) {
		return nil, errCorrupt
	}
	return payload, nil
}

func cachePath(dir, key string) string { return filepath.Join(dir, key+".mphost") }

// readCache returns the library cached for key: os.ErrNotExist when there is none, errCorrupt
// when the file does not decode.
func readCache(dir, key string) ([]byte, error) {
	b, err := os.ReadFile(cachePath(dir, key))
	if err != nil {
		return nil, err
	}
	return decodeEntry(b)
}

// writeCache stores an entry atomically (temporary file + rename), so that concurrent processes
// never see a partial file.
func writeCache(dir, key string, payload []byte) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, ".tmp-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	_, werr := f.Write(encodeEntry(payload))
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = os.Rename(tmp, cachePath(dir, key))
	}
	if werr != nil {
		os.Remove(tmp)
	}
	return werr
}

// defaultCacheDir is $METALPROVE_HOST_CACHE, else os.UserCacheDir()/metalprove/host, or a
// directory under os.TempDir() when there is no user cache directory.
func defaultCacheDir() string {
	if d := os.Getenv(CacheEnv); d != "" {
		return d
	}
	if d, err := os.UserCacheDir(); err == nil {
		return filepath.Join(d, "metalprove", "host")
	}
	return filepath.Join(os.TempDir(), "metalprove-host-cache")
}
