package yidu

import (
	"errors"
	"strings"
	"testing"
)

// FuzzParseUserIDList: any input parses or is refused with an error
// naming the field; what parses is valid, unique UserIDs, at most
// MaxUserIDs.
func FuzzParseUserIDList(f *testing.F) {
	for _, s := range []string{"alice\nbob\n", "userid,name\r\nalice,A\n", "\xef\xbb\xbfa\n\n b \n", "\"a\nb\",c\n", "\x00", "a b"} {
		f.Add([]byte(s), true)
		f.Add([]byte(s), false)
	}
	f.Fuzz(func(t *testing.T, data []byte, isCSV bool) {
		ids, err := ParseUserIDList(data, isCSV)
		if err != nil {
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "list") {
				t.Fatalf("error %q: not ErrInvalid naming list", err)
			}
			return
		}
		seen := map[string]bool{}
		for _, id := range ids {
			k := UserID(id).Fold()
			if !UserID(id).Valid() || seen[k] {
				t.Fatalf("parsed %q: invalid or duplicate", id)
			}
			seen[k] = true
		}
		if len(ids) > MaxUserIDs {
			t.Fatalf("%d ids", len(ids))
		}
	})
}
