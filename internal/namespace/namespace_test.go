package namespace_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/internal/namespace"
	"github.com/yidu-io/yidu/internal/testenv"
)

// TestClaim is the namespace's rule on MariaDB: a msgid is its first
// corp's and app's; another corp or app is refused without a word of
// whose it is; a registration may replay its own, never take a waiting
// notice's, which only that notice's send registers.
func TestClaim(t *testing.T) {
	if !testenv.Real() {
		t.Skip("YIDU_TEST_REAL=1 runs it against MariaDB")
	}
	db := testenv.MySQL(t)
	ctx := context.Background()
	now := time.Date(2026, 12, 3, 9, 0, 0, 0, time.UTC)
	steps := []struct {
		name           string
		corp, app, msg string
		kind           namespace.Kind
		wantErr        bool
	}{
		{"hr registers m1", "wwa", "hr", "m1", namespace.Message, false},
		{"hr replays m1", "wwa", "hr", "m1", namespace.Message, false},
		{"it takes m1", "wwa", "it", "m1", namespace.Message, true},
		{"corp b takes m1", "wwb", "hr", "m1", namespace.Message, true},
		{"hr schedules m1", "wwa", "hr", "m1", namespace.Notice, true},
		{"hr schedules s1", "wwa", "hr", "s1", namespace.Notice, false},
		{"hr registers s1 before its time", "wwa", "hr", "s1", namespace.Message, true},
		{"it registers s1", "wwa", "it", "s1", namespace.Message, true},
		{"corp b's notice send of s1", "wwb", "hr", "s1", namespace.NoticeSend, true},
		{"s1's own send", "wwa", "hr", "s1", namespace.NoticeSend, false},
		{"s1's send resumed", "wwa", "hr", "s1", namespace.NoticeSend, false},
		{"a second draft s1", "wwa", "hr", "s1", namespace.Notice, true},
	}
	for _, st := range steps {
		err := namespace.Claim(ctx, db, st.corp, st.app, st.msg, st.kind, now)
		if (err != nil) != st.wantErr || (err != nil && !errors.Is(err, yidu.ErrConflict)) {
			t.Errorf("%s: Claim = %v; want error %t (ErrConflict)", st.name, err, st.wantErr)
		}
		if err != nil {
			for _, whose := range []string{"wwa", "wwb", "hr", "it"} {
				if containsWord(err.Error(), whose) {
					t.Errorf("%s: %q says whose the msgid is", st.name, err)
				}
			}
		}
	}
}

func containsWord(s, w string) bool {
	for i := 0; i+len(w) <= len(s); i++ {
		if s[i:i+len(w)] == w && (i == 0 || s[i-1] == ' ') && (i+len(w) == len(s) || s[i+len(w)] == ' ' || s[i+len(w)] == ':') {
			return true
		}
	}
	return false
}
