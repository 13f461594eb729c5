package wecom_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/idmap"
	"github.com/yidu-io/yidu/internal/fakewecom"
	"github.com/yidu-io/yidu/wecom"
)

var _ idmap.Directory = (*wecom.Directory)(nil)

// dirCorp has departments 1 (root) > 2 > 3 and members a (1), b (1 and 3),
// c (3), d (2); d leads 2, b and c lead 3; tag 1 is a and d, tag 2 is a
// and department 3; app 1000002 sees everything, app 1000003 only the subtree
// of 2 (and a, one by one), app 1000004 only member a.
func dirCorp(id string) fakewecom.Corp {
	return fakewecom.Corp{
		CorpID: id,
		Apps: []fakewecom.App{
			{AgentID: 1000002, Secret: "app-secret"},
			{AgentID: 1000003, Secret: "narrow-secret", VisibleDepartments: []int{2}, VisibleUsers: []string{"a"}},
			{AgentID: 1000004, Secret: "one-secret", VisibleDepartments: []int{}, VisibleUsers: []string{"a"}},
		},
		ContactsSecret:  "contacts-secret",
		ContactsIDsOnly: true,
		Departments: []fakewecom.Department{
			{ID: 1, Name: "总部", Order: 9}, {ID: 2, ParentID: 1, Name: "研发", Order: 5, Leaders: []string{"d"}},
			{ID: 3, ParentID: 2, Name: "后端", Leaders: []string{"b", "c"}},
		},
		Tags: []fakewecom.Tag{
			{ID: 1, Name: "管理层", UserIDs: []string{"a", "d"}},
			{ID: 2, Name: "后端组", UserIDs: []string{"a"}, Departments: []int{3}},
		},
		Users: []fakewecom.User{
			{UserID: "a", Name: "张三", Departments: []int{1}},
			{UserID: "b", Name: "B", Departments: []int{1, 3}},
			{UserID: "c", Name: "C", Departments: []int{3}},
			{UserID: "d", Name: "D", Departments: []int{2}},
		},
	}
}

func newDirectory(tb testing.TB, corp, secret, contacts string) *wecom.Directory {
	tb.Helper()
	d, err := wecom.NewDirectory(wecom.App{CorpID: corp, AgentID: 1000002, Secret: secret}, wecom.DirectoryOptions{ContactsSecret: contacts})
	if err != nil {
		tb.Fatalf("NewDirectory: %v", err)
	}
	return d
}

func TestDirectoryList(t *testing.T) {
	const corp = "wwdir"
	ctx := context.Background()
	allDepts := []yidu.Department{{ID: 1, Name: "总部", Order: 9}, {ID: 2, ParentID: 1, Name: "研发", Order: 5}, {ID: 3, ParentID: 2, Name: "后端"}}
	tests := []struct {
		name             string
		edit             func(*fakewecom.Corp)
		secret, contacts string
		want             yidu.Listing
		listIDCalls      int
	}{
		{
			name: "app secret, whole corp visible", secret: "app-secret",
			want: yidu.Listing{Departments: allDepts, Complete: true, DepartmentNames: true, Tags: []yidu.Tag{{ID: 1, Name: "管理层", UserIDs: []string{"a", "d"}}, {ID: 2, Name: "后端组", UserIDs: []string{"a"}, Departments: []int64{3}}}, TagsListed: true, Leaders: map[int64][]string{2: {"d"}, 3: {"b", "c"}}, LeadersListed: true, Members: []yidu.Member{
				{UserID: "a", Name: "张三", Departments: []int64{1}},
				{UserID: "b", Name: "B", Departments: []int64{1, 3}},
				{UserID: "d", Name: "D", Departments: []int64{2}},
				{UserID: "c", Name: "C", Departments: []int64{3}},
			}},
		},
		{
			// a is visible one by one, outside any visible department:
			// user/simplelist cannot list a.
			name: "app secret, part of the corp visible", secret: "narrow-secret",
			// Tags: a is visible one by one, d in 2's subtree (tag/get
			// returns the visible range, doc path 90213).
			want: yidu.Listing{Departments: allDepts[1:], DepartmentNames: true, Tags: []yidu.Tag{{ID: 1, Name: "管理层", UserIDs: []string{"a", "d"}}, {ID: 2, Name: "后端组", UserIDs: []string{"a"}, Departments: []int64{3}}}, TagsListed: true, Leaders: map[int64][]string{2: {"d"}, 3: {"b", "c"}}, LeadersListed: true, Members: []yidu.Member{
				{UserID: "d", Name: "D", Departments: []int64{2}},
				{UserID: "b", Name: "B", Departments: []int64{3}}, // 1 is outside the range
				{UserID: "c", Name: "C", Departments: []int64{3}},
			}},
		},
		{
			name: "app secret, no names", secret: "app-secret",
			edit: func(c *fakewecom.Corp) { c.Apps[0].NoDepartmentNames, c.Apps[0].NoMemberNames = true, true },
			want: yidu.Listing{Departments: []yidu.Department{{ID: 1, Order: 9}, {ID: 2, ParentID: 1, Order: 5}, {ID: 3, ParentID: 2}}, Complete: true, Tags: []yidu.Tag{{ID: 1, Name: "管理层", UserIDs: []string{"a", "d"}}, {ID: 2, Name: "后端组", UserIDs: []string{"a"}, Departments: []int64{3}}}, TagsListed: true, Leaders: map[int64][]string{2: {"d"}, 3: {"b", "c"}}, LeadersListed: true, Members: []yidu.Member{
				{UserID: "a", Departments: []int64{1}},
				{UserID: "b", Departments: []int64{1, 3}},
				{UserID: "d", Departments: []int64{2}},
				{UserID: "c", Departments: []int64{3}},
			}},
		},
		{
			name: "app secret, members only one by one", secret: "one-secret",
			// Only a is visible: tag 1 is a alone, tag 2 loses department 3.
			want: yidu.Listing{Departments: []yidu.Department{}, Members: []yidu.Member{}, LeadersListed: true, Leaders: map[int64][]string{},
				TagsListed: true, Tags: []yidu.Tag{{ID: 1, Name: "管理层", UserIDs: []string{"a"}}, {ID: 2, Name: "后端组", UserIDs: []string{"a"}}}},
		},
		{
			// The contacts-sync secret lists everyone; names come with the
			// narrow app's token, as far as it sees.
			name: "contacts-sync secret", secret: "narrow-secret", contacts: "contacts-secret", listIDCalls: 1,
			want: yidu.Listing{Departments: append([]yidu.Department{{ID: 1, Order: 9}}, allDepts[1:]...), Complete: true, DepartmentNames: true, Tags: []yidu.Tag{{ID: 1, Name: "管理层", UserIDs: []string{"a", "d"}}, {ID: 2, Name: "后端组", UserIDs: []string{"a"}, Departments: []int64{3}}}, TagsListed: true, Leaders: map[int64][]string{2: {"d"}, 3: {"b", "c"}}, LeadersListed: true, Members: []yidu.Member{
				{UserID: "a", Departments: []int64{1}},
				{UserID: "b", Name: "B", Departments: []int64{1, 3}},
				{UserID: "c", Name: "C", Departments: []int64{3}},
				{UserID: "d", Name: "D", Departments: []int64{2}},
			}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := dirCorp(corp)
			if tt.edit != nil {
				tt.edit(&c)
			}
			fake.SetCorp(c)
			before := fake.Calls("/cgi-bin/user/list_id")
			got, err := newDirectory(t, corp, tt.secret, tt.contacts).List(ctx)
			if err != nil {
				t.Fatalf("List = %v", err)
			}
			got.Source = ""
			if fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Errorf("List =\n%+v\nwant\n%+v", got, tt.want)
			}
			if n := fake.Calls("/cgi-bin/user/list_id") - before; n != tt.listIDCalls {
				t.Errorf("user/list_id called %d times; want %d", n, tt.listIDCalls)
			}
		})
	}
}

// TestDirectoryListIDPages: user/list_id pages by 10000 pairs.
func TestDirectoryListIDPages(t *testing.T) {
	const corp, n = "wwpages", 10_050
	c := dirCorp(corp)
	c.Users = nil
	for i := range n {
		c.Users = append(c.Users, fakewecom.User{UserID: fmt.Sprintf("u%05d", i), Name: "x", Departments: []int{1 + i%3}})
	}
	fake.SetCorp(c)
	before := fake.Calls("/cgi-bin/user/list_id")
	l, err := newDirectory(t, corp, "app-secret", "contacts-secret").List(context.Background())
	if err != nil || len(l.Members) != n || l.Members[n-1].UserID != "u10049" {
		t.Fatalf("List = %d members, %v; want %d", len(l.Members), err, n)
	}
	if calls := fake.Calls("/cgi-bin/user/list_id") - before; calls != 2 {
		t.Errorf("user/list_id called %d times; want 2 pages", calls)
	}
}

// TestDirectoryWrongSecret: a secret in the wrong place fails loudly,
// naming the API, the errcode and what to fix.
func TestDirectoryWrongSecret(t *testing.T) {
	const corp = "wwwrong"
	fake.SetCorp(dirCorp(corp))
	ctx := context.Background()
	tests := []struct {
		name, secret, contacts string
		api                    string
		code                   int64
		hint                   string
	}{
		// Another app's secret where the contacts-sync one belongs:
		// gettoken accepts it, user/list_id does not.
		{"app secret as contacts secret", "app-secret", "narrow-secret", "user/list_id", fakewecom.ErrNoPermission, "user/list_id needs the contacts-sync secret"},
		{"wrong contacts secret", "app-secret", "nope", "gettoken", fakewecom.ErrInvalidCredential, "refused the contacts-sync secret"},
		{"wrong app secret", "nope", "", "gettoken", fakewecom.ErrInvalidCredential, "refused the app's secret"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := newDirectory(t, corp, tt.secret, tt.contacts).List(ctx)
			var ae *wecom.APIError
			if !errors.As(err, &ae) || ae.API != tt.api || ae.Code != tt.code {
				t.Fatalf("List = %v; want %s errcode %d", err, tt.api, tt.code)
			}
			msg := err.Error()
			for _, want := range []string{tt.api, fmt.Sprint(tt.code), tt.hint} {
				if !strings.Contains(msg, want) {
					t.Errorf("error %q does not say %q", msg, want)
				}
			}
			if strings.Contains(msg, "secret-") || strings.Contains(msg, "fake-token") {
				t.Errorf("error %q reveals a credential", msg)
			}
		})
	}
	t.Run("contacts secret equal to the app's", func(t *testing.T) {
		_, err := wecom.NewDirectory(wecom.App{CorpID: corp, Secret: "s"}, wecom.DirectoryOptions{ContactsSecret: "s"})
		if err == nil || !strings.Contains(err.Error(), "contacts-sync") {
			t.Errorf("NewDirectory = %v; want an error about the contacts-sync secret", err)
		}
	})
}

// TestDirectoryTokens: each secret has its own token, fetched once and
// again after WeCom rejects it; concurrent callers rejected together fetch
// one new token (run with -race: silenceper's cache is shared by them).
func TestDirectoryTokens(t *testing.T) {
	const corp = "wwtokens"
	fake.SetCorp(dirCorp(corp))
	ctx := context.Background()
	d := newDirectory(t, corp, "app-secret", "contacts-secret")
	before := fake.Calls("/cgi-bin/gettoken")
	if _, err := d.List(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := d.List(ctx); err != nil {
		t.Fatal(err)
	}
	if n := fake.Calls("/cgi-bin/gettoken") - before; n != 2 {
		t.Errorf("gettoken called %d times by two Lists with two secrets; want 2 (one token each, cached)", n)
	}
	fake.RevokeTokens()
	before = fake.Calls("/cgi-bin/gettoken")
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for i := range errs {
		wg.Go(func() { _, errs[i] = d.List(ctx) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("List %d after revocation: %v", i, err)
		}
	}
	if n := fake.Calls("/cgi-bin/gettoken") - before; n != 2 {
		t.Errorf("gettoken called %d times by 8 rejected callers; want 2 (one per secret)", n)
	}
}

func TestDirectoryCancelledContextSendsNothing(t *testing.T) {
	fake.SetCorp(dirCorp("wwcancel"))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	before := fake.Calls("/cgi-bin/department/simplelist") + fake.Calls("/cgi-bin/gettoken")
	if _, err := newDirectory(t, "wwcancel", "app-secret", "").List(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("List(cancelled) = %v; want context.Canceled", err)
	}
	if n := fake.Calls("/cgi-bin/department/simplelist") + fake.Calls("/cgi-bin/gettoken") - before; n != 0 {
		t.Errorf("%d requests sent with a cancelled context", n)
	}
}

// TestDirectoryErrorsHideCredentials: neither a secret nor a token may
// reach an error message (they end up in logs), whatever fails.
func TestDirectoryErrorsHideCredentials(t *testing.T) {
	const corp = "wwcreds"
	fake.SetCorp(dirCorp(corp))
	ctx := context.Background()
	http500 := func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusInternalServerError) }
	reset := func(w http.ResponseWriter, _ *http.Request) {
		conn, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			conn.Close()
		}
	}
	notJSON := func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte("<html>app-secret</html>")) }
	tests := []struct {
		name     string
		secret   string
		contacts string
		warm     bool // fetch tokens first, so the failing request carries one
		outage   http.HandlerFunc
	}{
		{"wrong secret", "wrong-secret", "", false, nil},
		{"wrong contacts secret", "app-secret", "wrong-contacts-secret", false, nil},
		{"gettoken http 500", "app-secret", "contacts-secret", false, http500},
		{"gettoken connection reset", "app-secret", "contacts-secret", false, reset},
		{"api http 500", "app-secret", "contacts-secret", true, http500},
		{"api connection reset", "app-secret", "contacts-secret", true, reset},
		{"api answers html", "app-secret", "contacts-secret", true, notJSON},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := newDirectory(t, corp, tt.secret, tt.contacts)
			if tt.warm {
				if _, err := d.List(ctx); err != nil {
					t.Fatal(err)
				}
			}
			if tt.outage != nil {
				server.Set(t, tt.outage)
			}
			_, err := d.List(ctx)
			if err == nil {
				t.Fatal("List succeeded")
			}
			for _, s := range []string{"secret-", "secret<", "fake-token", "access_token", "corpsecret"} {
				if strings.Contains(err.Error(), s) {
					t.Errorf("List error %q reveals %q", err, s)
				}
			}
		})
	}
}

// TestDirectoryMergesDepartments: a member listed under several
// departments is one member with all of them, in the order first seen.
func TestDirectoryMergesDepartments(t *testing.T) {
	c := dirCorp("wwmerge")
	c.Users = []fakewecom.User{{UserID: "m", Name: "M", Departments: []int{3, 2, 1}}}
	fake.SetCorp(c)
	l, err := newDirectory(t, "wwmerge", "app-secret", "").List(context.Background())
	if err != nil || len(l.Members) != 1 || !slices.Equal(l.Members[0].Departments, []int64{1, 3, 2}) {
		t.Errorf("List = %+v, %v; want m once, in 1, 3, 2", l.Members, err)
	}
}
