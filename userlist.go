package yidu

import (
	"bufio"
	"bytes"
	"encoding/csv"
	"io"
	"strings"
	"unicode/utf8"
)

// ParseUserIDList parses a pasted list or CSV of UserIDs: one per line
// (a CSV's first column), blank lines, a UTF-8 BOM and surrounding spaces
// ignored, duplicates dropped (first spelling kept), in first-seen order.
// It refuses what is not text (NUL bytes, invalid UTF-8), more than
// MaxUserIDs entries, and an entry that is not a WeCom UserID
// (a header line "userid" is skipped). Errors start with "list".
func ParseUserIDList(data []byte, isCSV bool) ([]string, error) {
	data = bytes.TrimPrefix(data, []byte("\xef\xbb\xbf"))
	if !utf8.Valid(data) || bytes.IndexByte(data, 0) >= 0 {
		return nil, Invalidf("list is not UTF-8 text")
	}
	var out []string
	seen := map[string]bool{}
	add := func(line int, v string) error {
		v = strings.TrimSpace(v)
		if v == "" || (len(out) == 0 && strings.EqualFold(v, "userid")) {
			return nil
		}
		if !UserID(v).Valid() {
			return Invalidf("list: line %d: %q is not a WeCom UserID", line, Truncate(v, 70))
		}
		if k := UserID(v).Fold(); !seen[k] {
			if len(out) == MaxUserIDs {
				return Invalidf("list: more than %d UserIDs", MaxUserIDs)
			}
			seen[k] = true
			out = append(out, v)
		}
		return nil
	}
	if isCSV {
		cr := csv.NewReader(bytes.NewReader(data))
		cr.FieldsPerRecord = -1
		cr.LazyQuotes = true
		for line := 1; ; line++ {
			rec, err := cr.Read()
			if err == io.EOF {
				break
			}
			if err != nil {
				return nil, Invalidf("list: not CSV: %v", err)
			}
			if len(rec) > 0 {
				if err := add(line, rec[0]); err != nil {
					return nil, err
				}
			}
		}
		return out, nil
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 4096), len(data)+1)
	for line := 1; sc.Scan(); line++ {
		if err := add(line, sc.Text()); err != nil {
			return nil, err
		}
	}
	return out, nil
}
