package tracker

import (
	"errors"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/yidu-io/yidu/config"
)

func TestMsgIDFromTaskID(t *testing.T) {
	tests := []struct{ task, want string }{
		{"abc", "abc"},
		{"abc@0", "abc"},
		{"abc@17", "abc"},
		{"abc@r2-5", "abc"},
		{"abc@1@2", "abc"},
		{"@0", ""},
		{"", ""},
	}
	for _, tt := range tests {
		if got := MsgIDFromTaskID(tt.task); got != tt.want {
			t.Errorf("MsgIDFromTaskID(%q) = %q; want %q", tt.task, got, tt.want)
		}
	}
}

func TestValidUserID(t *testing.T) {
	tests := []struct {
		id   string
		want bool
	}{
		{"zhangsan", true},
		{"Zhang.San@corp", true},
		{"a_b-c", true},
		{"9", true},
		{strings.Repeat("a", 64), true},
		{strings.Repeat("a", 65), false},
		{"", false},
		{"_a", false},
		{"a b", false},
		{"a|b", false}, // the touser separator
		{"张三", false},
		{"a'b", false},
	}
	for _, tt := range tests {
		if got := ValidUserID(tt.id); got != tt.want {
			t.Errorf("ValidUserID(%q) = %v; want %v", tt.id, got, tt.want)
		}
	}
}

var msgIDRule = regexp.MustCompile(`^[0-9A-Za-z_-]{1,100}$`)

func FuzzValidate(f *testing.F) {
	f.Add("notice-2026_01", "zhangsan", int64(2), "Title", false)
	f.Add("", "a.b@c", int64(1), "标题", true)
	f.Add("x'; DROP TABLE messages; --", "u", int64(0), "t", false)
	f.Add("a@1", "a|b", int64(-5), "t\x00", false)
	f.Add(strings.Repeat("z", 101), "", int64(1), "", true)
	f.Add("%_", "<b>", int64(3), "<script>", false)
	app := config.App{Name: "hr", CorpID: "ww1234", AgentID: 1000002}
	now := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, msgID, userID string, dept int64, title string, all bool) {
		au := Audience{All: all}
		if userID != "" {
			au.UserIDs = []string{userID, userID}
		}
		if dept != 0 {
			au.Departments = []int64{dept}
		}
		reg := Registration{MsgID: msgID, App: app, Title: title, Audience: au}
		c, err := validate(&reg, now)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("validate error %v is not ErrInvalid", err)
			}
			return
		}
		if !msgIDRule.MatchString(reg.MsgID) || msgID != "" && reg.MsgID != msgID {
			t.Fatalf("accepted msgid %q (from %q)", reg.MsgID, msgID)
		}
		if got := MsgIDFromTaskID(reg.MsgID + "@12"); got != reg.MsgID {
			t.Fatalf("MsgIDFromTaskID(%q@12) = %q", reg.MsgID, got)
		}
		for _, u := range c.userIDs {
			if !ValidUserID(u) {
				t.Fatalf("accepted userid %q", u)
			}
		}
		if len(c.userIDs) > 1 {
			t.Fatalf("duplicates kept: %q", c.userIDs)
		}
		// Same audience written differently hashes the same.
		reg2 := Registration{MsgID: reg.MsgID, App: app, Title: title, Audience: Audience{All: all, UserIDs: c.userIDs, Departments: c.depts}}
		c2, err := validate(&reg2, now)
		if err != nil || c2.hash != c.hash || len(c.hash) != 64 {
			t.Fatalf("hash %q vs %q (%v)", c.hash, c2.hash, err)
		}
	})
}

func FuzzParseCursor(f *testing.F) {
	f.Add(cursor{time.UnixMilli(1700000000123).UTC(), "ww1", "msg-1"}.String())
	f.Add("")
	f.Add("MXwnOyBEUk9QfHg")
	f.Fuzz(func(t *testing.T, s string) {
		c, err := parseCursor(s)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("parseCursor error %v is not ErrInvalid", err)
			}
			return
		}
		if !ValidMsgID(c.msgID) || !validCorpID(c.corpID) {
			t.Fatalf("accepted cursor %+v", c)
		}
		back, err := parseCursor(c.String())
		if err != nil || back != c {
			t.Fatalf("round trip %+v → %+v, %v", c, back, err)
		}
	})
}
