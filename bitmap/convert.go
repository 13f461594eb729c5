package bitmap

import (
	"encoding/binary"
	"math/bits"

	"github.com/RoaringBitmap/roaring/v2"
)

// FromRedis decodes a Redis string bitmap (bit n is bit 7-n%8 of byte n/8)
// into a roaring bitmap. Eight bytes read big-endian hold bits 0..63 from the
// top down, so reversing the word gives roaring's dense layout (bit n is
// bit n%64 of word n/64) and the whole conversion is one pass over words.
func FromRedis(b []byte) *roaring.Bitmap {
	if len(b) == 0 {
		return roaring.New()
	}
	words := make([]uint64, (len(b)+7)/8)
	full := len(b) / 8
	for i := range full {
		words[i] = bits.Reverse64(binary.BigEndian.Uint64(b[i*8:]))
	}
	if full < len(words) {
		var tail [8]byte
		copy(tail[:], b[full*8:])
		words[full] = bits.Reverse64(binary.BigEndian.Uint64(tail[:]))
	}
	return roaring.FromDense(words, false)
}

// ToRedis encodes bm as a Redis string bitmap, as short as its largest
// member allows. An empty bitmap encodes as an empty slice.
func ToRedis(bm *roaring.Bitmap) []byte {
	if bm == nil || bm.IsEmpty() {
		return []byte{}
	}
	words := bm.ToDense()
	out := make([]byte, len(words)*8)
	for i, w := range words {
		binary.BigEndian.PutUint64(out[i*8:], bits.Reverse64(w))
	}
	return out[:bm.Maximum()/8+1]
}
