package wecom_test

import (
	"context"
	"errors"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/yidu-io/yidu/callback"
	"github.com/yidu-io/yidu/internal/fakewecom"
	"github.com/yidu-io/yidu/internal/testenv"
	"github.com/yidu-io/yidu/wecom"
)

var _ callback.OAuth = (*wecom.OAuth)(nil)

// silenceper's URI modifier is process-wide: one server for the whole test
// binary, set up here; tests must not run in parallel. It answers as the
// fake unless a test sets an outage.
var (
	fake   = fakewecom.New()
	server = testenv.NewOutages(fake)
)

func TestMain(m *testing.M) { os.Exit(testenv.RunWithWeCom(m, server)) }

const secret = "top-secret-of-hr"

var apps = []wecom.App{
	{CorpID: "wwauth", AgentID: 1000002, Secret: secret},
	{CorpID: "wwauth", AgentID: 1000003},
}

func TestUserID(t *testing.T) {
	fake.SetCorp(fakewecom.Corp{CorpID: "wwauth", Apps: []fakewecom.App{{AgentID: 1000002, Secret: secret}}, Codes: map[string]string{
		"code-zhang": "zhangsan",
		"code-guest": "", // a visitor who is not a member: no userid
		"a&b=c d":    "odd",
	}})
	e := wecom.NewOAuth(apps)
	ctx := context.Background()
	tokens := fake.Calls("/cgi-bin/gettoken")
	tests := []struct {
		name     string
		agent    int64
		code     string
		want     string
		wantCode int64 // WeCom errcode in an *APIError; 0: none
		wantErr  error
	}{
		{name: "member", agent: 1000002, code: "code-zhang", want: "zhangsan"},
		{name: "not a member", agent: 1000002, code: "code-guest", want: ""},
		{name: "escaped code", agent: 1000002, code: "a&b=c d", want: "odd"},
		{name: "invalid code", agent: 1000002, code: "nope", wantCode: fakewecom.ErrInvalidCode},
		{name: "app without secret", agent: 1000003, code: "code-zhang", wantErr: wecom.ErrNoApp},
		{name: "unknown agent", agent: 1, code: "code-zhang", wantErr: wecom.ErrNoApp},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := e.UserID(ctx, "wwauth", tt.agent, tt.code)
			var ae *wecom.APIError
			switch {
			case tt.wantCode != 0:
				if !errors.As(err, &ae) || ae.Code != tt.wantCode {
					t.Errorf("UserID(%q) = %q, %v; want errcode %d", tt.code, got, err, tt.wantCode)
				}
			case tt.wantErr != nil:
				if !errors.Is(err, tt.wantErr) {
					t.Errorf("UserID(%q) = %q, %v; want %v", tt.code, got, err, tt.wantErr)
				}
			case err != nil || got != tt.want:
				t.Errorf("UserID(%q) = %q, %v; want %q", tt.code, got, err, tt.want)
			}
		})
	}
	if n := fake.Calls("/cgi-bin/gettoken") - tokens; n != 1 {
		t.Errorf("gettoken calls = %d; want 1 (the token is cached)", n)
	}
}

func TestUserIDRefetchesRejectedToken(t *testing.T) {
	fake.SetCorp(fakewecom.Corp{CorpID: "wwauth", Apps: []fakewecom.App{{AgentID: 1000002, Secret: secret}}, Codes: map[string]string{"c1": "lisi"}})
	e := wecom.NewOAuth(apps)
	ctx := context.Background()
	if got, err := e.UserID(ctx, "wwauth", 1000002, "c1"); err != nil || got != "lisi" {
		t.Fatalf("UserID = %q, %v", got, err)
	}
	fake.RevokeTokens() // the token expired at WeCom: 40014 once, then a new one
	before := fake.Calls("/cgi-bin/gettoken")
	if got, err := e.UserID(ctx, "wwauth", 1000002, "c1"); err != nil || got != "lisi" {
		t.Errorf("UserID after revocation = %q, %v; want lisi", got, err)
	}
	if n := fake.Calls("/cgi-bin/gettoken") - before; n != 1 {
		t.Errorf("gettoken calls after revocation = %d; want 1", n)
	}
}

func TestErrorsCarryNoCredentials(t *testing.T) {
	fake.SetCorp(fakewecom.Corp{CorpID: "wwauth", Apps: []fakewecom.App{{AgentID: 1000002, Secret: secret}}, Codes: map[string]string{"c1": "lisi"}})
	ctx := context.Background()
	check := func(t *testing.T, err error) {
		t.Helper()
		if err == nil {
			t.Fatal("UserID succeeded; want an error")
		}
		for _, s := range []string{secret, "access_token=", "corpsecret=", "fake-token", "c1"} {
			if strings.Contains(err.Error(), s) {
				t.Errorf("error %q contains %q", err, s)
			}
		}
	}
	t.Run("gettoken answers 500", func(t *testing.T) {
		server.Set(t, func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusInternalServerError) })
		_, err := wecom.NewOAuth(apps).UserID(ctx, "wwauth", 1000002, "c1")
		check(t, err)
	})
	t.Run("getuserinfo answers 502", func(t *testing.T) {
		e := wecom.NewOAuth(apps)
		if _, err := e.UserID(ctx, "wwauth", 1000002, "c1"); err != nil {
			t.Fatal(err) // a token in the cache
		}
		server.Set(t, func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusBadGateway) })
		_, err := e.UserID(ctx, "wwauth", 1000002, "c1")
		check(t, err)
	})
	t.Run("wrong secret", func(t *testing.T) {
		_, err := wecom.NewOAuth([]wecom.App{{CorpID: "wwauth", AgentID: 1000002, Secret: "wrong"}}).UserID(ctx, "wwauth", 1000002, "c1")
		check(t, err)
	})
}

func TestUserIDHonoursContext(t *testing.T) {
	fake.SetCorp(fakewecom.Corp{CorpID: "wwauth", Apps: []fakewecom.App{{AgentID: 1000002, Secret: secret}}, Codes: map[string]string{"c1": "lisi"}})
	e := wecom.NewOAuth(apps)
	if _, err := e.UserID(context.Background(), "wwauth", 1000002, "c1"); err != nil {
		t.Fatal(err) // a token in the cache: the hung call is getuserinfo
	}
	release := make(chan struct{})
	defer close(release)
	server.Set(t, func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	// A UserID deaf to ctx would block until release, after the test.
	_, err := e.UserID(ctx, "wwauth", 1000002, "c1")
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("UserID with a hung WeCom = %v; want context.DeadlineExceeded", err)
	}
}
