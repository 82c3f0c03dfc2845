package stark

import (
	"bytes"
	"testing"
)

// FuzzDecodeProof: decoding never panics; a successful decode re-encodes to the input.
func FuzzDecodeProof(f *testing.F) {
	b := smallProofBytes(f)
	f.Add(b)
	f.Add(b[:len(b)/2])
	f.Add([]byte{3, 0, 0, 0})
	f.Fuzz(func(t *testing.T, in []byte) {
		pr, err := UnmarshalProof(in)
		if err != nil {
			if _, ok := err.(*DecodeError); !ok {
				t.Fatalf("error %T is not a *DecodeError: %v", err, err)
			}
			return
		}
		out, err := pr.MarshalBinary()
		if err != nil {
			t.Fatalf("decoded proof does not re-encode: %v", err)
		}
		if !bytes.Equal(out, in) {
			t.Fatalf("re-encoding differs from the input")
		}
	})
}

// FuzzDecodeWhirProof: the same for a WhirProof on its own.
func FuzzDecodeWhirProof(f *testing.F) {
	f.Add(readSectionF(f))
	w := newCodecGen(5).whir(sectionFParams(), []int{1, 3})
	if b, err := EncodeWhirProof(&w); err == nil {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		w, err := DecodeWhirProof(in, nil)
		if err != nil {
			if _, ok := err.(*DecodeError); !ok {
				t.Fatalf("error %T is not a *DecodeError: %v", err, err)
			}
			return
		}
		out, err := EncodeWhirProof(w)
		if err != nil {
			t.Fatalf("decoded proof does not re-encode: %v", err)
		}
		if !bytes.Equal(out, in) {
			t.Fatalf("re-encoding differs from the input")
		}
	})
}
