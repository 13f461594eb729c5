package delta

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"os"
)

// TornError says where a segment stops being readable.
type TornError struct {
	Path   string
	Offset int64
}

func (e *TornError) Error() string {
	return fmt.Sprintf("delta: spool: %s: torn or corrupt record at byte %d", e.Path, e.Offset)
}

// ReadSpoolSegment returns the deltas of one spool segment, in order. A
// torn or corrupt record ends it: the deltas before it are returned with
// a *TornError.
func ReadSpoolSegment(path string) ([]Delta, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("delta: spool: %w", err)
	}
	ds, off := decodeSpool(b)
	if off < len(b) {
		return ds, &TornError{Path: path, Offset: int64(off)}
	}
	return ds, nil
}

// appendRecord appends one spool record holding value v.
func appendRecord(b, v []byte) []byte {
	b = binary.AppendUvarint(b, uint64(len(v)))
	b = binary.BigEndian.AppendUint32(b, crc32.Checksum(v, castagnoli))
	return append(b, v...)
}

// decodeSpool decodes records from b until the first that is torn,
// corrupt or not a delta; off is where it stopped.
func decodeSpool(b []byte) (ds []Delta, off int) {
	for off < len(b) {
		l, n := binary.Uvarint(b[off:])
		if n <= 0 || l > 1<<16 || uint64(len(b)-off-n) < 4+l {
			return ds, off
		}
		p := off + n
		sum := binary.BigEndian.Uint32(b[p:])
		v := b[p+4 : p+4+int(l)]
		if crc32.Checksum(v, castagnoli) != sum {
			return ds, off
		}
		d, err := Unmarshal(v)
		if err != nil {
			return ds, off
		}
		ds = append(ds, d)
		off = p + 4 + int(l)
	}
	return ds, off
}

// syncDir fsyncs a directory, so a file created in it survives a crash.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("delta: spool: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("delta: spool: fsync %s: %w", dir, err)
	}
	return nil
}
