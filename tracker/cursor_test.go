package tracker

import (
	"errors"
	"testing"
	"time"

	"github.com/yidu-io/yidu"
)

func FuzzParseCursor(f *testing.F) {
	f.Add(cursor{time.UnixMilli(1700000000123).UTC(), "ww1", "msg-1"}.String())
	f.Add("")
	f.Add("MXwnOyBEUk9QfHg")
	f.Fuzz(func(t *testing.T, s string) {
		c, err := parseCursor(s)
		if err != nil {
			if !errors.Is(err, yidu.ErrInvalid) {
				t.Fatalf("parseCursor error %v is not yidu.ErrInvalid", err)
			}
			return
		}
		if !yidu.MsgID(c.msgID).Valid() || !yidu.CorpID(c.corpID).Valid() {
			t.Fatalf("accepted cursor %+v", c)
		}
		back, err := parseCursor(c.String())
		if err != nil || back != c {
			t.Fatalf("round trip %+v → %+v, %v", c, back, err)
		}
	})
}
