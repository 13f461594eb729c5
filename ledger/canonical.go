package ledger

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"unicode/utf8"
)

// Body is an entry's fields before encoding: names to values, each a
// string, an int64, a bool or a []string. Canonical encodes it.
type Body map[string]any

// Canonical encodes b as the ledger's canonical JSON (docs/evidence.md):
// one object, members sorted by name (byte order; names are ASCII), no
// white space, integers in decimal without sign for zero or leading
// zeros, strings as RFC 8785 (JCS) writes them: UTF-8, with only ", \ and
// the control characters escaped (\b \f \n \r \t, others as \u00xx in
// lower-case hex). It is JCS restricted to strings, integers, booleans
// and arrays of strings, so any JCS implementation reproduces the bytes.
func Canonical(b Body) ([]byte, error) {
	names := slices.Sorted(maps.Keys(b))
	out := make([]byte, 0, 64*len(names))
	out = append(out, '{')
	for i, k := range names {
		if i > 0 {
			out = append(out, ',')
		}
		for j := 0; j < len(k); j++ {
			if k[j] >= utf8.RuneSelf {
				return nil, fmt.Errorf("ledger: body member %q: names are ASCII", k)
			}
		}
		var err error
		if out, err = appendString(out, k); err != nil {
			return nil, err
		}
		out = append(out, ':')
		switch v := b[k].(type) {
		case string:
			if out, err = appendString(out, v); err != nil {
				return nil, fmt.Errorf("ledger: body member %q: %w", k, err)
			}
		case int64:
			out = strconv.AppendInt(out, v, 10)
		case int:
			out = strconv.AppendInt(out, int64(v), 10)
		case uint32:
			out = strconv.AppendUint(out, uint64(v), 10)
		case uint64:
			out = strconv.AppendUint(out, v, 10)
		case bool:
			out = strconv.AppendBool(out, v)
		case []string:
			out = append(out, '[')
			for j, s := range v {
				if j > 0 {
					out = append(out, ',')
				}
				if out, err = appendString(out, s); err != nil {
					return nil, fmt.Errorf("ledger: body member %q: %w", k, err)
				}
			}
			out = append(out, ']')
		default:
			return nil, fmt.Errorf("ledger: body member %q: type %T has no canonical form", k, v)
		}
	}
	return append(out, '}'), nil
}

const hexDigits = "0123456789abcdef"

// shortEscapes are the characters a JSON string escapes with a letter
// (or themselves), by byte; the other bytes below 0x20 take \u00XX.
var shortEscapes = [...]byte{'"': '"', '\\': '\\', '\b': 'b', '\f': 'f', '\n': 'n', '\r': 'r', '\t': 't'}

func appendString(out []byte, s string) ([]byte, error) {
	if !utf8.ValidString(s) {
		return nil, fmt.Errorf("string is not UTF-8")
	}
	out = append(out, '"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case int(c) < len(shortEscapes) && shortEscapes[c] != 0:
			out = append(out, '\\', shortEscapes[c])
		case c < 0x20:
			out = append(out, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
		default:
			out = append(out, c)
		}
	}
	return append(out, '"'), nil
}
