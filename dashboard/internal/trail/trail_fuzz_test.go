package trail

import (
	"errors"
	"net/url"
	"testing"

	"github.com/yidu-io/yidu/audit"
	"github.com/yidu-io/yidu/dashboard/internal/handle"
)

// FuzzAuditQuery: any query string is either refused as a bad parameter
// or gives a query whose limit, action, msgid and cursor are in range.
func FuzzAuditQuery(f *testing.F) {
	for _, s := range []string{"", "limit=1", "limit=501", "cursor=12&action=send", "action=drop", "since=2026-01-01T00:00:00Z",
		"msgid=a%20b", "actor=%00", "cursor=007", "actor=" + string(make([]byte, 200))} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		v, err := url.ParseQuery(raw)
		if err != nil {
			return
		}
		q, err := parseQuery(v)
		if err != nil {
			if !errors.Is(err, handle.ErrBadParam) {
				t.Fatalf("%q: %v is not a bad parameter", raw, err)
			}
			return
		}
		if q.Limit < 1 || q.Limit > audit.MaxLimit || q.Before < 0 {
			t.Fatalf("%q: limit %d, cursor %d", raw, q.Limit, q.Before)
		}
		if q.Action != "" && q.Action.Validate() != nil {
			t.Fatalf("%q: action %q", raw, q.Action)
		}
		if _, err := handle.ParseMsgID(q.MsgID); q.MsgID != "" && err != nil {
			t.Fatalf("%q: msgid %q", raw, q.MsgID)
		}
	})
}
