package rfc3161

import (
	"encoding/asn1"
	"testing"
)

// FuzzVerify: a token is bytes from a pack anyone may hand in; Verify
// answers every one with a token or an error, never a panic, and never
// accepts bytes as a token over a message they do not stamp.
func FuzzVerify(f *testing.F) {
	seq, _ := asn1.Marshal(asn1.RawValue{Class: asn1.ClassUniversal, Tag: asn1.TagSequence, IsCompound: true, Bytes: []byte{0x06, 0x09, 0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x07, 0x02}})
	for _, seed := range [][]byte{nil, {}, {0x30}, {0x30, 0x80}, {0x30, 0x03, 0x02, 0x01, 0x01}, seq} {
		f.Add(seed, []byte("checkpoint"))
	}
	f.Fuzz(func(t *testing.T, token, message []byte) {
		tok, err := Verify(token, message, nil)
		if err == nil && tok.Time.IsZero() {
			t.Errorf("Verify(%x) accepted a token with no time", token)
		}
	})
}
