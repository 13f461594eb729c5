package wecomdir_test

import (
	"context"
	"errors"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/idmap"
	"github.com/yidu-io/yidu/idmap/wecomdir"
	"github.com/yidu-io/yidu/internal/fakewecom"
	"github.com/yidu-io/yidu/internal/testenv"
)

// silenceper's URI modifier is process-wide, so every test of this binary
// talks to one server, set up once here; tests must not run in parallel.
// The server answers as the fake unless a test sets an outage.
var (
	fake  = fakewecom.New()
	wecom = testenv.NewOutages(fake)
)

func TestMain(m *testing.M) { os.Exit(testenv.RunWithWeCom(m, wecom)) }

func corp(id, secret string) fakewecom.Corp {
	return fakewecom.Corp{
		CorpID: id,
		Apps:   []fakewecom.App{{AgentID: 1000002, Secret: secret}},
		Departments: []fakewecom.Department{
			{ID: 1, Name: "总部"}, {ID: 2, ParentID: 1, Name: "研发", Order: 5},
		},
		Users: []fakewecom.User{
			{UserID: "a", Name: "张三", Departments: []int{1}},
			{UserID: "b", Name: "B", Departments: []int{1, 2}},
			{UserID: "c", Name: "C", Departments: []int{2}},
		},
	}
}

func TestClient(t *testing.T) {
	fake.SetCorp(corp("wwclient", "top-secret"))
	c := wecomdir.New("wwclient", "top-secret")
	ctx := context.Background()

	depts, err := c.Departments(ctx)
	if err != nil || !slices.Equal(depts, []yidu.Department{{ID: 1}, {ID: 2, ParentID: 1, Order: 5}}) {
		t.Errorf("Departments = %+v, %v", depts, err)
	}
	names, err := c.DepartmentNames(ctx)
	if err != nil || len(names) != 2 || names[1] != "总部" || names[2] != "研发" {
		t.Errorf("DepartmentNames = %v, %v", names, err)
	}
	users, err := c.DepartmentUsers(ctx, 1)
	if err != nil || !slices.Equal(users, []idmap.NamedUser{{UserID: "a", Name: "张三"}, {UserID: "b", Name: "B"}}) {
		t.Errorf("DepartmentUsers(1) = %+v, %v", users, err)
	}

	// Cursor paging, two pairs a page: a/1 b/1 | b/2 c/2.
	var all []idmap.DeptUser
	cursor, pages := "", 0
	for {
		pairs, next, err := c.UserIDs(ctx, cursor, 2)
		if err != nil {
			t.Fatalf("UserIDs(%q) = %v", cursor, err)
		}
		all = append(all, pairs...)
		pages++
		if next == "" || pages > 3 {
			break
		}
		cursor = next
	}
	want := []idmap.DeptUser{{UserID: "a", Department: 1}, {UserID: "b", Department: 1}, {UserID: "b", Department: 2}, {UserID: "c", Department: 2}}
	if !slices.Equal(all, want) || pages != 2 {
		t.Errorf("UserIDs pages = %d, pairs %v; want 2, %v", pages, all, want)
	}

	t.Run("token fetched once, again after revocation", func(t *testing.T) {
		before := fake.Calls("/cgi-bin/gettoken")
		if _, err := c.Departments(ctx); err != nil {
			t.Fatal(err)
		}
		if n := fake.Calls("/cgi-bin/gettoken") - before; n != 0 {
			t.Errorf("gettoken called %d times with a cached token; want 0", n)
		}
		fake.RevokeTokens()
		if _, err := c.Departments(ctx); err != nil {
			t.Errorf("Departments after token revocation = %v", err)
		}
		if n := fake.Calls("/cgi-bin/gettoken") - before; n != 1 {
			t.Errorf("gettoken called %d times after revocation; want 1", n)
		}
	})

	t.Run("errcodes are APIErrors", func(t *testing.T) {
		tests := []struct {
			name string
			call func() error
			api  string
			code int64
		}{
			{"missing department", func() error { _, err := c.DepartmentUsers(ctx, 99); return err },
				"user/simplelist", fakewecom.ErrDepartmentMissing},
			{"bad limit", func() error { _, _, err := c.UserIDs(ctx, "", 10001); return err },
				"user/list_id", fakewecom.ErrBadParameter},
			{"wrong secret", func() error { _, err := wecomdir.New("wwclient", "wrong").Departments(ctx); return err },
				"gettoken", fakewecom.ErrInvalidCredential},
			{"unknown corp", func() error { _, err := wecomdir.New("wwnobody", "x").DepartmentNames(ctx); return err },
				"gettoken", fakewecom.ErrInvalidCorpID},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				err := tt.call()
				var apiErr *idmap.APIError
				if !errors.As(err, &apiErr) || apiErr.API != tt.api || apiErr.Code != tt.code {
					t.Errorf("error = %v; want APIError %s %d", err, tt.api, tt.code)
				}
			})
		}
	})

	t.Run("department/list refused", func(t *testing.T) {
		c2 := corp("wwnolist", "s")
		c2.Apps[0].NoDepartmentNames = true
		fake.SetCorp(c2)
		_, err := wecomdir.New("wwnolist", "s").DepartmentNames(ctx)
		var apiErr *idmap.APIError
		if !errors.As(err, &apiErr) || apiErr.Code != fakewecom.ErrNoPermission {
			t.Errorf("DepartmentNames = %v; want errcode %d", err, fakewecom.ErrNoPermission)
		}
	})

	t.Run("cancelled context sends nothing", func(t *testing.T) {
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		before := fake.Calls("/cgi-bin/department/simplelist") + fake.Calls("/cgi-bin/gettoken")
		if _, err := wecomdir.New("wwclient", "top-secret").Departments(cctx); !errors.Is(err, context.Canceled) {
			t.Errorf("Departments(cancelled) = %v; want context.Canceled", err)
		}
		if n := fake.Calls("/cgi-bin/department/simplelist") + fake.Calls("/cgi-bin/gettoken") - before; n != 0 {
			t.Errorf("%d requests sent with a cancelled context", n)
		}
	})
}

// TestErrorsHideCredentials: neither the secret nor the token may reach an
// error message (they end up in logs), whatever fails: silenceper writes
// URLs, with the secret or token in their query, into its errors.
func TestErrorsHideCredentials(t *testing.T) {
	fake.SetCorp(corp("wwcreds", "top-secret"))
	ctx := context.Background()
	http500 := func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusInternalServerError) }
	reset := func(w http.ResponseWriter, _ *http.Request) {
		conn, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			conn.Close()
		}
	}
	notJSON := func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte("<html>top-secret</html>")) }

	tests := []struct {
		name   string
		secret string
		warm   bool // fetch a token first, so the failing request carries it
		outage http.HandlerFunc
	}{
		{"wrong secret", "wrong-secret", false, nil},
		{"gettoken http 500", "top-secret", false, http500},
		{"gettoken connection reset", "top-secret", false, reset},
		{"api http 500", "top-secret", true, http500},
		{"api connection reset", "top-secret", true, reset},
		{"api answers html", "top-secret", true, notJSON},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := wecomdir.New("wwcreds", tt.secret)
			if tt.warm {
				if _, err := c.Departments(ctx); err != nil {
					t.Fatal(err)
				}
			}
			if tt.outage != nil {
				wecom.Set(t, tt.outage)
			}
			for name, call := range map[string]func() error{
				"Departments":     func() error { _, err := c.Departments(ctx); return err },
				"DepartmentNames": func() error { _, err := c.DepartmentNames(ctx); return err },
				"UserIDs":         func() error { _, _, err := c.UserIDs(ctx, "", 10); return err },
				"DepartmentUsers": func() error { _, err := c.DepartmentUsers(ctx, 1); return err },
			} {
				err := call()
				if err == nil {
					t.Fatalf("%s succeeded", name)
				}
				for _, secret := range []string{"secret", "fake-token", "access_token"} {
					if strings.Contains(err.Error(), secret) {
						t.Errorf("%s error %q reveals %q", name, err, secret)
					}
				}
			}
		})
	}

	// A token rejected after a successful gettoken, with the secret rotated
	// meanwhile, must not leak either.
	c := wecomdir.New("wwcreds", "top-secret")
	if _, err := c.Departments(ctx); err != nil {
		t.Fatal(err)
	}
	fake.SetCorp(fakewecom.Corp{CorpID: "wwcreds", Apps: []fakewecom.App{{AgentID: 1000002, Secret: "rotated"}}})
	fake.RevokeTokens()
	_, err := c.Departments(ctx)
	var apiErr *idmap.APIError
	if !errors.As(err, &apiErr) || apiErr.Code != fakewecom.ErrInvalidCredential ||
		strings.Contains(err.Error(), "secret") || strings.Contains(err.Error(), "fake-token") {
		t.Errorf("Departments after rotation = %v; want errcode %d without credentials", err, fakewecom.ErrInvalidCredential)
	}
}

// TestConcurrentRefresh: callers rejected on one token together fetch a new
// one once (run with -race: silenceper's memory cache is shared by them).
func TestConcurrentRefresh(t *testing.T) {
	fake.SetCorp(corp("wwconc", "s"))
	c := wecomdir.New("wwconc", "s")
	ctx := context.Background()
	if _, err := c.Departments(ctx); err != nil {
		t.Fatal(err)
	}
	fake.RevokeTokens()
	before := fake.Calls("/cgi-bin/gettoken")
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for i := range errs {
		wg.Go(func() { _, errs[i] = c.DepartmentUsers(ctx, 2) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("caller %d: %v", i, err)
		}
	}
	if n := fake.Calls("/cgi-bin/gettoken") - before; n != 1 {
		t.Errorf("gettoken called %d times by 8 rejected callers; want 1", n)
	}
}
