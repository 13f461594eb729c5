package access_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/access"
	"github.com/yidu-io/yidu/audit"
	"github.com/yidu-io/yidu/internal/testenv"
	"github.com/yidu-io/yidu/internal/webedge"
)

// downSessions is a session store that cannot keep a session (Redis
// down).
type downSessions struct{ access.SessionStore }

func (downSessions) Put(context.Context, string, access.Session, time.Duration) error {
	return errors.New("redis: connection refused")
}

// signInRows is each row as "action outcome actor kind corp role".
func signInRows(es []audit.Event) []string {
	out := []string{}
	for _, e := range es {
		out = append(out, fmt.Sprintf("%s %s %s %s %s %s", e.Action, e.Outcome, e.Actor, e.ActorKind, e.CorpID, e.Role))
	}
	return out
}

// TestSignInRows (issue 47): a password sign-in returns the audit rows
// it is due, decided by access: sign_in for a success; a refused
// sign_in_failed naming a configured user whose password was wrong, but
// "unknown" for any other name (no row names whatever a stranger
// typed); none over the limits or when the session cannot be kept.
func TestSignInRows(t *testing.T) {
	if !testenv.Real() {
		t.Skip("YIDU_TEST_REAL=1 runs it against Redis")
	}
	h, err := bcrypt.GenerateFromPassword([]byte("pw"), bcrypt.MinCost)
	testenv.Check(t, "hash", err)
	rdb, prefix := testenv.Redis(t)
	users := []access.User{{Name: "bob", PasswordHash: string(h), Grant: access.Grant{Role: yidu.RoleAdmin, Scope: yidu.Scope{Corp: corp}}}}
	ids, err := access.NewIdentities(access.IdentityOptions{Users: users, Sessions: webedge.DashboardSessions(rdb, prefix)})
	testenv.Check(t, "NewIdentities", err)
	down, err := access.NewIdentities(access.IdentityOptions{Users: users, Sessions: downSessions{}})
	testenv.Check(t, "NewIdentities", err)
	ctx := context.Background()
	tests := []struct {
		name, ip, user, password string
		ids                      *access.Identities
		want                     []string
		err                      error
		session                  bool
	}{
		{"signed in", "192.0.2.1", "bob", "pw", ids, []string{"sign_in ok bob password  "}, nil, true},
		{"wrong password", "192.0.2.2", "bob", "guess", ids, []string{"sign_in_failed refused bob password  "}, access.ErrBadPassword, false},
		{"a stranger's name", "192.0.2.3", "<script>alice", "pw", ids, []string{"sign_in_failed refused unknown password  "}, access.ErrBadPassword, false},
		{"sessions down", "192.0.2.4", "bob", "pw", down, []string{"sign_in_failed failed bob password  "}, nil, false},
		{"sessions down, a stranger's name", "192.0.2.5", "<script>alice", "pw", down, []string{"sign_in_failed refused unknown password  "}, access.ErrBadPassword, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			at, err := tt.ids.SignIn(ctx, tt.ip, tt.user, tt.password)
			if got := signInRows(at.Audit); !slices.Equal(got, tt.want) {
				t.Errorf("SignIn(%s) rows %q; want %q", tt.user, got, tt.want)
			}
			if tt.err != nil && !errors.Is(err, tt.err) || tt.err == nil && tt.session && err != nil || !tt.session && err == nil {
				t.Errorf("SignIn(%s) = %v; want %v", tt.user, err, tt.err)
			}
			if (at.ID != "" && at.Session != nil) != tt.session {
				t.Errorf("SignIn(%s) opened %q %+v; want a session %v", tt.user, at.ID, at.Session, tt.session)
			}
		})
	}
	t.Run("over the limits", func(t *testing.T) {
		for range 20 {
			at, err := ids.SignIn(ctx, "192.0.2.9", "bob", "guess")
			if errors.Is(err, access.ErrRateLimited) {
				if len(at.Audit) != 0 {
					t.Errorf("rate-limited sign-in rows %q; want none", signInRows(at.Audit))
				}
				return
			}
		}
		t.Fatal("20 wrong passwords from one address were never limited")
	})
}

// TestSignInWeComRows (issue 47): a sign-in with WeCom returns the one
// row it is due, decided by access against the directory on MariaDB and
// sessions on Redis: none for a forged or replayed state; refused for
// who is not an active member or has no role; failed when WeCom could
// not tell or the session not be kept; sign_in with the member's role.
func TestSignInWeComRows(t *testing.T) {
	if !testenv.Real() {
		t.Skip("YIDU_TEST_REAL=1 runs it against MariaDB and Redis")
	}
	f := newFixture(t)
	acc, err := access.New(access.Config{Roles: []access.RoleGrant{
		{UserID: "boss", Grant: access.Grant{Role: yidu.RoleAdmin, Scope: yidu.Scope{Corp: corp}}},
	}}, f.m, time.Now)
	testenv.Check(t, "access.New", err)
	rdb, prefix := testenv.Redis(t)
	ids, err := access.NewIdentities(access.IdentityOptions{Sessions: webedge.DashboardSessions(rdb, prefix), WeCom: acc})
	testenv.Check(t, "NewIdentities", err)
	down, err := access.NewIdentities(access.IdentityOptions{Sessions: downSessions{}, WeCom: acc})
	testenv.Check(t, "NewIdentities", err)
	ctx := context.Background()
	wecomDown := errors.New("wecom: auth/getuserinfo: 500")
	tests := []struct {
		name    string
		ids     *access.Identities
		f       access.WeComFinish
		want    []string
		err     error
		session bool
	}{
		{"forged state", ids, access.WeComFinish{Err: access.ErrBadState}, []string{}, access.ErrBadState, false},
		{"replayed code", ids, access.WeComFinish{Err: fmt.Errorf("finish: %w", access.ErrCodeUsed)}, []string{}, access.ErrCodeUsed, false},
		{"wecom down", ids, access.WeComFinish{Err: wecomDown}, []string{"sign_in_failed failed unknown wecom wwhome "}, wecomDown, false},
		{"not a member", ids, access.WeComFinish{Corp: corp, UserID: "ghost"}, []string{"sign_in_failed refused ghost wecom wwcorp "}, access.ErrNotMember, false},
		{"no role", ids, access.WeComFinish{Corp: corp, UserID: "eng1"}, []string{"sign_in_failed refused eng1 wecom wwcorp "}, access.ErrNoRole, false},
		{"sessions down", down, access.WeComFinish{Corp: corp, UserID: "boss"}, []string{"sign_in_failed failed boss wecom wwcorp admin"}, nil, false},
		{"signed in", ids, access.WeComFinish{Corp: corp, UserID: "boss"}, []string{"sign_in ok boss wecom wwcorp admin"}, nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			at, err := tt.ids.SignInWeCom(ctx, acc, "wwhome", tt.f)
			if got := signInRows(at.Audit); !slices.Equal(got, tt.want) {
				t.Errorf("SignInWeCom rows %q; want %q", got, tt.want)
			}
			if tt.err != nil && !errors.Is(err, tt.err) || tt.session && err != nil || !tt.session && err == nil {
				t.Errorf("SignInWeCom = %v; want %v", err, tt.err)
			}
			if (at.ID != "" && at.Session != nil) != tt.session {
				t.Errorf("SignInWeCom opened %q %+v; want a session %v", at.ID, at.Session, tt.session)
			}
			if tt.session {
				s, ok, err := tt.ids.Lookup(ctx, at.ID)
				if err != nil || !ok || s.Principal.UserID != "boss" {
					t.Errorf("Lookup of the session opened = %+v, %v, %v; want boss's", s, ok, err)
				}
			}
		})
	}
}
