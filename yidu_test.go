package yidu

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// TestValid: each identifier's one rule, on the inputs where the layers
// used to disagree.
func TestValid(t *testing.T) {
	tests := []struct {
		kind      string
		valid     func(string) bool
		good, bad []string
	}{
		{
			kind:  "msgid",
			valid: func(s string) bool { return MsgID(s).Valid() },
			good:  []string{"task-1", "A_b-c9", strings.Repeat("x", MaxMsgID)},
			bad: []string{
				strings.Repeat("x", MaxMsgID+1), // no room for "@<batch>" in 128 bytes
				"",
				"a@1", // '@' separates the send batch
				"a/b", "a}b", "通知", "a b",
			},
		},
		{
			kind:  "corpid",
			valid: func(s string) bool { return CorpID(s).Valid() },
			good:  []string{"ww1234567890abcdef", "wx5823bf96d3bd56c7", "corp-a_1", strings.Repeat("w", 64)},
			bad:   []string{strings.Repeat("w", 65), "", "ww 1", "ww:1", "ww{1}"},
		},
		{
			kind:  "userid",
			valid: func(s string) bool { return UserID(s).Valid() },
			good:  []string{"zhangsan", "Zhang.San@corp", "a_b-c", "9", "a.", strings.Repeat("a", 64)},
			bad: []string{
				strings.Repeat("a", 65), "", "_a", "-dash", ".dot", "@at", "a b",
				"a|b", // the touser separator
				"张三", "a'b",
			},
		},
		{
			// Not WeCom's rule: what a member's listed UserID may be for
			// yidu to keep it (Valid's rule breakers included).
			kind:  "storable userid",
			valid: func(s string) bool { return UserID(s).Storable() },
			good:  []string{"zhangsan", "-dash", "张三", "a b", strings.Repeat("a", 64), strings.Repeat("张", 21)},
			bad:   []string{"", strings.Repeat("a", 65), strings.Repeat("张", 22), "a\xffb", "alice "},
		},
	}
	rule := regexp.MustCompile("^" + MsgIDRule + "$")
	for _, id := range append(tests[0].good, tests[0].bad...) {
		if rule.MatchString(id) != MsgID(id).Valid() {
			t.Errorf("msgid %q: MsgIDRule says %v, Valid() %v", id, rule.MatchString(id), MsgID(id).Valid())
		}
	}
	for _, tt := range tests {
		for _, id := range tt.good {
			if !tt.valid(id) {
				t.Errorf("%s %q: Valid() = false; want true", tt.kind, id)
			}
		}
		for _, id := range tt.bad {
			if tt.valid(id) {
				t.Errorf("%s %q: Valid() = true; want false", tt.kind, id)
			}
		}
	}
}

// TestUserIDFold: WeCom compares UserIDs case-insensitively; yidu folds
// all-ASCII ones to lower case and leaves the rest as spelt (the SQL of
// users.userid_key does the same; idmap's tests hold the two together).
func TestUserIDFold(t *testing.T) {
	tests := []struct{ in, want string }{
		{"zhangsan", "zhangsan"},
		{"ZhangSan", "zhangsan"},
		{"Zhang.San@Corp-1_X", "zhang.san@corp-1_x"},
		{"ÉMILE", "ÉMILE"}, // not ASCII: compared as spelt
		{"张三A", "张三A"},
		{"", ""},
	}
	for _, tt := range tests {
		if got := UserID(tt.in).Fold(); got != tt.want {
			t.Errorf("UserID(%q).Fold() = %q; want %q", tt.in, got, tt.want)
		}
		if got := string(UserID(tt.in).AppendFold([]byte("x"))); got != "x"+tt.want {
			t.Errorf("UserID(%q).AppendFold(x) = %q; want %q", tt.in, got, "x"+tt.want)
		}
	}
	var buf [MaxUserID]byte
	if n := testing.AllocsPerRun(100, func() { _ = UserID("ZhangSan").AppendFold(buf[:0]) }); n != 0 {
		t.Errorf("AppendFold into a large enough buffer allocates %v times; want 0", n)
	}
}

func TestParseTaskID(t *testing.T) {
	tests := []struct {
		task  string
		want  MsgID
		ok    bool
		valid bool // ValidTaskID
	}{
		{"abc", "abc", true, true},
		{"abc@0", "abc", true, true},
		{"abc@17", "abc", true, true},
		{"abc@r2-5", "abc", true, true},
		{"abc@1@2", "abc", true, true},
		{"@0", "", false, true}, // a WeCom task_id, but no msgid of ours
		{"", "", false, false},
		{"a b@1", "", false, false},
		{strings.Repeat("a", MaxMsgID+1) + "@1", "", false, true},
		{strings.Repeat("a", 100) + "@" + strings.Repeat("1", 28), "", false, false}, // 129 bytes
	}
	for _, tt := range tests {
		got, ok := ParseTaskID(tt.task)
		if got != tt.want || ok != tt.ok {
			t.Errorf("ParseTaskID(%q) = %q, %v; want %q, %v", tt.task, got, ok, tt.want, tt.ok)
		}
		if v := ValidTaskID(tt.task); v != tt.valid {
			t.Errorf("ValidTaskID(%q) = %v; want %v", tt.task, v, tt.valid)
		}
	}
	if got, ok := ParseTaskID(TaskID("notice-1", 999)); got != "notice-1" || !ok {
		t.Errorf("ParseTaskID(TaskID(notice-1, 999)) = %q, %v", got, ok)
	}
}

// TestTaskIDFormats pins every task_id yidu sends: the formats are part of
// the deployed data (message_sends, cards already in members' chats), and
// each must parse back to its message and fit WeCom's 128 bytes with the
// longest msgid.
func TestTaskIDFormats(t *testing.T) {
	long := MsgID(strings.Repeat("m", MaxMsgID))
	tests := []struct {
		name string
		got  string
		want string
	}{
		{"send", TaskID("n1", 3), "n1@3"},
		{"reminder", ReminderTaskID("n1", 2, 5), "n1@r2-5"},
		{"round", RoundTaskID("n1", 1, 0), "n1@f1-0"},
		{"digest", DigestTaskID("n1", 4, 7), "n1@d4-7"},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("%s task_id = %q; want %q", tt.name, tt.got, tt.want)
		}
		if m, ok := ParseTaskID(tt.got); !ok || m != "n1" {
			t.Errorf("ParseTaskID(%q) = %q, %v; want n1, true", tt.got, m, ok)
		}
	}
	for _, id := range []string{TaskID(long, 9999), ReminderTaskID(long, 999, 999), RoundTaskID(long, 99, 999), DigestTaskID(long, 99, 9999)} {
		if !ValidTaskID(id) {
			t.Errorf("ValidTaskID(%q) = false: a task_id yidu sends must be WeCom's", id)
		}
	}
}

func TestNewMsgID(t *testing.T) {
	seen := map[MsgID]bool{}
	for range 100 {
		id := NewMsgID()
		if !id.Valid() || len(id) != 20 || seen[id] {
			t.Fatalf("NewMsgID() = %q (valid %v, seen %v)", id, id.Valid(), seen[id])
		}
		seen[id] = true
	}
}

func TestTruncate(t *testing.T) {
	tests := []struct {
		s    string
		n    int
		want string
	}{
		{"short", 10, "short"},
		{"abcdef", 3, "abc…"},
		{"通知通知", 4, "通…"}, // never half a character
		{"通知", 2, "…"},
	}
	for _, tt := range tests {
		got := Truncate(tt.s, tt.n)
		if got != tt.want || !utf8.ValidString(got) {
			t.Errorf("Truncate(%q, %d) = %q; want %q", tt.s, tt.n, got, tt.want)
		}
	}
}

var testApp = App{Name: "hr", CorpID: "ww1234", AgentID: 1000002}

func TestRegistrationValidate(t *testing.T) {
	now := time.Date(2026, 3, 1, 9, 0, 0, 123456789, time.UTC)
	many := make([]string, MaxUserIDs+1)
	for i := range many {
		many[i] = "u" + strings.Repeat("x", i%5)
	}
	tests := []struct {
		name    string
		reg     Registration
		wantErr string // "" valid
	}{
		{name: "userids", reg: Registration{MsgID: "n1", App: testApp, Title: " T ", Audience: Audience{UserIDs: []string{"b", "a", "b"}}}},
		{name: "departments and userids mix (as touser|toparty)", reg: Registration{App: testApp, Title: "T", Audience: Audience{UserIDs: []string{"a"}, Departments: []int64{3, 1, 3}}}},
		{name: "all", reg: Registration{App: testApp, Title: "T", Audience: Audience{All: true}}},
		{name: "no audience", reg: Registration{App: testApp, Title: "T"}, wantErr: "audience needs"},
		{name: "msgid with @", reg: Registration{MsgID: "a@1", App: testApp, Title: "T", Audience: Audience{All: true}}, wantErr: "msgid"},
		{name: "empty title", reg: Registration{App: testApp, Title: "  ", Audience: Audience{All: true}}, wantErr: "title"},
		{name: "control in title", reg: Registration{App: testApp, Title: "a\x00b", Audience: Audience{All: true}}, wantErr: "control"},
		{name: "long title", reg: Registration{App: testApp, Title: strings.Repeat("通", MaxTitle+1), Audience: Audience{All: true}}, wantErr: "title"},
		{name: "bad userid", reg: Registration{App: testApp, Title: "T", Audience: Audience{UserIDs: []string{"-dash"}}}, wantErr: "not a WeCom UserID"},
		{name: "bad department", reg: Registration{App: testApp, Title: "T", Audience: Audience{Departments: []int64{0}}}, wantErr: "department"},
		{name: "too many userids", reg: Registration{App: testApp, Title: "T", Audience: Audience{UserIDs: many}}, wantErr: "too large"},
		{name: "bad corp", reg: Registration{App: App{Name: "hr", CorpID: "w w", AgentID: 1}, Title: "T", Audience: Audience{All: true}}, wantErr: "corp_id"},
		{name: "no agent", reg: Registration{App: App{Name: "hr", CorpID: "ww"}, Title: "T", Audience: Audience{All: true}}, wantErr: "agent_id"},
		{name: "sent_at a day ahead", reg: Registration{App: testApp, Title: "T", SentAt: now.Add(24 * time.Hour), Audience: Audience{All: true}}, wantErr: "sent_at"},
		{name: "sent_at in 9999", reg: Registration{App: testApp, Title: "T", SentAt: time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC), Audience: Audience{All: true}}, wantErr: "sent_at"},
		{name: "sent_at a minute ahead (clock skew)", reg: Registration{App: testApp, Title: "T", SentAt: now.Add(time.Minute), Audience: Audience{All: true}}},
		{name: "sent_at before 2000", reg: Registration{App: testApp, Title: "T", SentAt: time.Date(1999, 1, 1, 0, 0, 0, 0, time.UTC), Audience: Audience{All: true}}, wantErr: "sent_at"},
		{name: "body and url", reg: Registration{App: testApp, Title: strings.Repeat("题", MaxCardTitle), Body: " " + strings.Repeat("文", MaxBody) + "\n", URL: "https://intra.example.com/p/1?a=b#c", Send: true, Audience: Audience{All: true}}},
		{name: "multi-line body", reg: Registration{App: testApp, Title: "T", Body: "第一行\n第二行", Audience: Audience{All: true}}},
		{name: "long title without send", reg: Registration{App: testApp, Title: strings.Repeat("题", MaxCardTitle+1), Audience: Audience{All: true}}},
		{name: "long title with send", reg: Registration{App: testApp, Title: strings.Repeat("题", MaxCardTitle+1), Send: true, Audience: Audience{All: true}}, wantErr: "title:"},
		{name: "long body", reg: Registration{App: testApp, Title: "T", Body: strings.Repeat("文", MaxBody+1), Audience: Audience{All: true}}, wantErr: "body:"},
		{name: "control in body", reg: Registration{App: testApp, Title: "T", Body: "a\x07b", Audience: Audience{All: true}}, wantErr: "body"},
		{name: "body not UTF-8", reg: Registration{App: testApp, Title: "T", Body: "\xff", Audience: Audience{All: true}}, wantErr: "body"},
		{name: "relative url", reg: Registration{App: testApp, Title: "T", URL: "/p/1", Audience: Audience{All: true}}, wantErr: "url"},
		{name: "ftp url", reg: Registration{App: testApp, Title: "T", URL: "ftp://x.example.com/f", Audience: Audience{All: true}}, wantErr: "url"},
		{name: "url with a space", reg: Registration{App: testApp, Title: "T", URL: "https://x.example.com/a b", Audience: Audience{All: true}}, wantErr: "url"},
		{name: "url too long", reg: Registration{App: testApp, Title: "T", URL: "https://x.example.com/" + strings.Repeat("a", MaxURL), Audience: Audience{All: true}}, wantErr: "url:"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			reg := tt.reg
			err := reg.Validate(now)
			if tt.wantErr != "" {
				if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Validate = %v; want ErrInvalid mentioning %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Validate = %v", err)
			}
			wantSent := now
			if !tt.reg.SentAt.IsZero() {
				wantSent = tt.reg.SentAt
			}
			if !MsgID(reg.MsgID).Valid() || reg.SentAt != wantSent.UTC().Truncate(time.Millisecond) || reg.Title != strings.TrimSpace(tt.reg.Title) ||
				reg.Body != strings.TrimSpace(tt.reg.Body) {
				t.Errorf("defaults: msgid %q sent_at %v title %q", reg.MsgID, reg.SentAt, reg.Title)
			}
			if !slices.IsSorted(reg.Audience.UserIDs) || !slices.IsSorted(reg.Audience.Departments) ||
				len(slices.Compact(slices.Clone(reg.Audience.UserIDs))) != len(reg.Audience.UserIDs) ||
				len(slices.Compact(slices.Clone(reg.Audience.Departments))) != len(reg.Audience.Departments) {
				t.Errorf("audience not canonical: %+v", reg.Audience)
			}
		})
	}
}

var msgIDRule = regexp.MustCompile(`^[0-9A-Za-z_-]{1,100}$`)

// FuzzRegistrationValidate: whatever a client sends, an accepted
// registration has a msgid, UserIDs and departments every other layer
// accepts too, in canonical form; a refused one is ErrInvalid.
func FuzzRegistrationValidate(f *testing.F) {
	f.Add("notice-2026_01", "zhangsan", int64(2), "Title", false)
	f.Add("", "a.b@c", int64(1), "标题", true)
	f.Add("x'; DROP TABLE messages; --", "u", int64(0), "t", false)
	f.Add("a@1", "a|b", int64(-5), "t\x00", false)
	f.Add(strings.Repeat("z", 101), "", int64(1), "", true)
	f.Add("%_", "<b>", int64(3), "<script>", false)
	now := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, msgID, userID string, dept int64, title string, all bool) {
		au := Audience{All: all}
		if userID != "" {
			au.UserIDs = []string{userID, userID}
		}
		if dept != 0 {
			au.Departments = []int64{dept}
		}
		reg := Registration{MsgID: msgID, App: testApp, Title: title, Audience: au}
		if err := reg.Validate(now); err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("Validate error %v is not ErrInvalid", err)
			}
			return
		}
		if !msgIDRule.MatchString(reg.MsgID) || msgID != "" && reg.MsgID != msgID {
			t.Fatalf("accepted msgid %q (from %q)", reg.MsgID, msgID)
		}
		if got, ok := ParseTaskID(TaskID(MsgID(reg.MsgID), 12)); !ok || string(got) != reg.MsgID {
			t.Fatalf("ParseTaskID(TaskID(%q, 12)) = %q, %v", reg.MsgID, got, ok)
		}
		for _, u := range reg.Audience.UserIDs {
			if !UserID(u).Valid() {
				t.Fatalf("accepted userid %q", u)
			}
		}
		if len(reg.Audience.UserIDs) > 1 {
			t.Fatalf("duplicates kept: %q", reg.Audience.UserIDs)
		}
		again := reg
		if err := again.Validate(now); err != nil || again.Title != reg.Title || again.SentAt != reg.SentAt {
			t.Fatalf("Validate is not idempotent: %v, %+v vs %+v", err, again, reg)
		}
	})
}

func TestGroupDigits(t *testing.T) {
	for in, want := range map[string]string{"": "", "7": "7", "123": "123", "1234": "1,234", "98231": "98,231", "1000000": "1,000,000"} {
		if got := GroupDigits(in); got != want {
			t.Errorf("GroupDigits(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestFieldError: a validator's error names its field by type (errors.As),
// is an ErrInvalid (400), and keeps the message the API always answered.
func TestFieldError(t *testing.T) {
	s := Schedule{Draft: true, SendAt: time.Unix(1, 0)}
	err := s.Validate(time.Unix(0, 0))
	var fe *FieldError
	if !errors.As(err, &fe) || fe.Field != "send_at" || !errors.Is(err, ErrInvalid) {
		t.Fatalf("Validate = %v; want a FieldError at send_at wrapping ErrInvalid", err)
	}
	if got, want := fmt.Errorf("campaign: %w", err).Error(), "campaign: invalid: send_at must be empty for a draft"; got != want {
		t.Errorf("message %q, want %q", got, want)
	}
}
