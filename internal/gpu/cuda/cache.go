package cuda

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// Cache entries: one file per compiled module, named by the SHA-256 of everything that shapes
// the output, holding
//
//	"MPCUDA01" | kind (1 byte: 'C' cubin, 'P' PTX) | 3 zero bytes | SHA-256(payload) | payload
//
// A file that does not decode, or whose module the driver rejects, is recompiled and replaced.
const cacheMagic = "MPCUDA01"

const (
	kindCubin = 'C'
	kindPTX   = 'P'
)

const cacheHeader = len(cacheMagic) + 4 + sha256.Size

// cacheKey hashes the source, the target architecture, the NVRTC version and the options.
func cacheKey(source, target, nvrtcVersion string, opts []string) string {
	h := sha256.New()
	field := func(s string) {
		fmt.Fprintf(h, "%d:", len(s))
		h.Write([]byte(s))
	}
	field(cacheMagic)
	field(target)
	field(nvrtcVersion)
	for _, o := range opts {
		field(o)
	}
	field(source)
	return hex.EncodeToString(h.Sum(nil))
}

func encodeEntry(kind byte, payload []byte) []byte {
	sum := sha256.Sum256(payload)
	b := make([]byte, 0, cacheHeader+len(payload))
	b = append(b, cacheMagic...)
	b = append(b, kind, 0, 0, 0)
	b = append(b, sum[:]...)
	return append(b, payload...)
}

var errCorrupt = errors.New("corrupt cache entry")

func decodeEntry(b []byte) (kind byte, payload []byte, err error) {
	if len(b) < cacheHeader || string(b[:len(cacheMagic)]) != cacheMagic {
		return 0, nil, errCorrupt
	}
	kind = b[len(cacheMagic)]
	if kind != kindCubin && kind != kindPTX {
		return 0, nil, errCorrupt
	}
	payload = b[cacheHeader:]
	sum := sha256.Sum256(payload)
	if !bytes.Equal(sum[:], b[len(cacheMagic)+4:cacheHeader]) || len(payload) == 0 {
		return 0, nil, errCorrupt
	}
	return kind, payload, nil
}

func cachePath(dir, key string) string { return filepath.Join(dir, key+".mpcuda") }

// readCache returns the entry for key: os.ErrNotExist when there is none, errCorrupt when it
// does not decode.
func readCache(dir, key string) (kind byte, payload []byte, err error) {
	b, err := os.ReadFile(cachePath(dir, key))
	if err != nil {
		return 0, nil, err
	}
	return decodeEntry(b)
}

// writeCache stores an entry atomically (temporary file + rename), so concurrent processes never
// see a partial file.
func writeCache(dir, key string, kind byte, payload []byte) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, ".tmp-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	_, werr := f.Write(encodeEntry(kind, payload))
	cerr := f.Close()
	if werr == nil {
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

// defaultCacheDir is os.UserCacheDir()/metalprove/cuda, or a directory under os.TempDir()
// when there is no user cache directory.
func defaultCacheDir() string {
	if d, err := os.UserCacheDir(); err == nil {
		return filepath.Join(d, "metalprove", "cuda")
	}
	return filepath.Join(os.TempDir(), "metalprove-cuda-cache")
}
