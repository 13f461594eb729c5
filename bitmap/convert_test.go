package bitmap

import (
	"bytes"
	"context"
	"fmt"
	"math/bits"
	"math/rand/v2"
	"testing"

	"github.com/RoaringBitmap/roaring/v2"

	"github.com/yidu-io/yidu/internal/testenv"
)

// naiveToRedis is the definition of Redis bit order, bit by bit.
func naiveToRedis(us []uint32) []byte {
	var b []byte
	for _, u := range us {
		for uint32(len(b)) <= u/8 {
			b = append(b, 0)
		}
		b[u/8] |= 0x80 >> (u % 8)
	}
	if b == nil {
		b = []byte{}
	}
	return b
}

func TestToRedisFromRedis(t *testing.T) {
	tests := []struct {
		name string
		uids []uint32
		want []byte
	}{
		{"empty", nil, []byte{}},
		{"bit 0 is the MSB of byte 0", []uint32{0}, []byte{0x80}},
		{"bit 7 is the LSB of byte 0", []uint32{7}, []byte{0x01}},
		{"bit 8", []uint32{8}, []byte{0x00, 0x80}},
		{"bits 0 and 9", []uint32{0, 9}, []byte{0x80, 0x40}},
		{"word boundary 63 64", []uint32{63, 64}, []byte{0, 0, 0, 0, 0, 0, 0, 0x01, 0x80}},
		{"container boundary", []uint32{65535, 65536}, naiveToRedis([]uint32{65535, 65536})},
		{"far uid", []uint32{1<<24 + 3}, naiveToRedis([]uint32{1<<24 + 3})},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			bm := roaring.BitmapOf(tt.uids...)
			got := ToRedis(bm)
			if !bytes.Equal(got, tt.want) {
				t.Errorf("ToRedis(%v) = %x; want %x", tt.uids, got, tt.want)
			}
			back := FromRedis(got)
			if !back.Equals(bm) {
				t.Errorf("FromRedis(ToRedis(%v)) = %v", tt.uids, back.ToArray())
			}
		})
	}
}

func TestFromRedisTrailingBytes(t *testing.T) {
	// Redis pads a bitmap with zero bytes (SETBIT 0 on a far offset); they
	// must not add members, and odd lengths must decode.
	for n := 1; n <= 17; n++ {
		b := make([]byte, n)
		b[n-1] = 0x01
		got := FromRedis(b)
		if want := uint32(n*8 - 1); got.GetCardinality() != 1 || !got.Contains(want) {
			t.Errorf("FromRedis(%d bytes, last bit) = %v; want [%d]", n, got.ToArray(), want)
		}
	}
}

func TestConvertRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 50 {
		n := r.IntN(5000)
		span := uint32(1 + r.IntN(1<<21))
		us := make([]uint32, n)
		for j := range us {
			us[j] = r.Uint32N(span)
		}
		bm := roaring.BitmapOf(us...)
		if i%3 == 0 {
			bm.RunOptimize() // run containers convert too
		}
		got := ToRedis(bm)
		if want := naiveToRedis(bm.ToArray()); !bytes.Equal(got, want) {
			t.Fatalf("case %d: ToRedis differs from the bit-by-bit encoding", i)
		}
		if back := FromRedis(got); !back.Equals(bm) {
			t.Fatalf("case %d: FromRedis(ToRedis(bm)) != bm", i)
		}
	}
}

func TestConvertAgainstRedis(t *testing.T) {
	// Redis itself is the reference: SETBIT what we encode, GETBIT what we
	// decode.
	rdb, prefix := testenv.Redis(t)
	ctx := context.Background()
	us := []uint32{0, 1, 7, 8, 63, 64, 1000, 65535, 65536, 99999}
	key := prefix + ":convert"
	for _, u := range us {
		testenv.Check(t, "SETBIT", rdb.SetBit(ctx, key, int64(u), 1).Err())
	}
	b, err := rdb.Get(ctx, key).Bytes()
	testenv.Check(t, "GET", err)
	bm := FromRedis(b)
	if !bm.Equals(roaring.BitmapOf(us...)) {
		t.Errorf("FromRedis(redis SETBIT %v) = %v", us, bm.ToArray())
	}
	key2 := prefix + ":convert2"
	testenv.Check(t, "SET", rdb.Set(ctx, key2, ToRedis(roaring.BitmapOf(us...)), 0).Err())
	for _, u := range append(us, 2, 100000) {
		got, err := rdb.GetBit(ctx, key2, int64(u)).Result()
		testenv.Check(t, "GETBIT", err)
		want := int64(0)
		if roaring.BitmapOf(us...).Contains(u) {
			want = 1
		}
		if got != want {
			t.Errorf("GETBIT %d = %d; want %d", u, got, want)
		}
	}
	n, err := rdb.BitCount(ctx, key2, nil).Result()
	testenv.Check(t, "BITCOUNT", err)
	if n != int64(len(us)) {
		t.Errorf("BITCOUNT = %d; want %d", n, len(us))
	}
}

func benchBitmap(n int) *roaring.Bitmap {
	r := rand.New(rand.NewPCG(3, 4))
	bm := roaring.New()
	for bm.GetCardinality() < uint64(n) {
		bm.Add(r.Uint32N(uint32(n) * 2)) // half the uids of a dense corp
	}
	return bm
}

func BenchmarkToRedis(b *testing.B) {
	for _, n := range []int{100_000, 1_000_000} {
		bm := benchBitmap(n)
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			for b.Loop() {
				ToRedis(bm)
			}
		})
	}
}

func BenchmarkFromRedis(b *testing.B) {
	for _, n := range []int{100_000, 1_000_000} {
		raw := ToRedis(benchBitmap(n))
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			b.SetBytes(int64(len(raw)))
			for b.Loop() {
				FromRedis(raw)
			}
		})
	}
}

// FuzzFromRedis: any Redis string decodes, and encodes back to itself
// without its trailing zero bytes.
func FuzzFromRedis(f *testing.F) {
	for _, seed := range [][]byte{{}, {0x80}, {0, 0, 0x01}, {0xff, 0, 0, 0, 0, 0, 0, 0, 0x01}, bytes.Repeat([]byte{0xa5}, 17)} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		bm := FromRedis(b)
		want := bytes.TrimRight(b, "\x00")
		if got := ToRedis(bm); !bytes.Equal(got, want) {
			t.Errorf("ToRedis(FromRedis(%x)) = %x; want %x", b, got, want)
		}
		var ones uint64
		for _, c := range b {
			ones += uint64(bits.OnesCount8(c))
		}
		if bm.GetCardinality() != ones {
			t.Errorf("FromRedis(%x) has %d members; want %d", b, bm.GetCardinality(), ones)
		}
	})
}
