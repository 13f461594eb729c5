package wecomdir_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/yidu-io/yidu/idmap"
	"github.com/yidu-io/yidu/idmap/wecomdir"
	"github.com/yidu-io/yidu/internal/fakewecom"
)

func corp() fakewecom.Corp {
	return fakewecom.Corp{
		CorpID: "wwcorp",
		Secret: "top-secret",
		Departments: []fakewecom.Department{
			{ID: 1, Name: "root"}, {ID: 2, ParentID: 1, Name: "eng", Order: 5},
		},
		Users: []fakewecom.User{
			{UserID: "a", Name: "A", Departments: []int{1}},
			{UserID: "b", Name: "B", Departments: []int{1, 2}},
			{UserID: "c", Name: "C", Departments: []int{2}},
		},
	}
}

func TestClient(t *testing.T) {
	fake := fakewecom.New(corp())
	c := wecomdir.New("wwcorp", "top-secret", fakewecom.Start(t, fake), nil)
	ctx := context.Background()

	depts, err := c.Departments(ctx)
	if err != nil || !slices.Equal(depts, []idmap.Department{{ID: 1}, {ID: 2, ParentID: 1, Order: 5}}) {
		t.Errorf("Departments = %+v, %v", depts, err)
	}
	names, err := c.DepartmentNames(ctx)
	if err != nil || names[1] != "root" || names[2] != "eng" {
		t.Errorf("DepartmentNames = %v, %v", names, err)
	}
	users, err := c.DepartmentUsers(ctx, 2)
	if err != nil || !slices.Equal(users, []idmap.NamedUser{{UserID: "b", Name: "B"}, {UserID: "c", Name: "C"}}) {
		t.Errorf("DepartmentUsers(2) = %+v, %v", users, err)
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
		if next == "" {
			break
		}
		cursor = next
	}
	want := []idmap.DeptUser{{UserID: "a", Department: 1}, {UserID: "b", Department: 1}, {UserID: "b", Department: 2}, {UserID: "c", Department: 2}}
	if !slices.Equal(all, want) || pages != 2 {
		t.Errorf("UserIDs pages = %d, pairs %v; want 2, %v", pages, all, want)
	}

	// An expired token is fetched again, once, transparently.
	fake.RevokeTokens()
	if _, err := c.Departments(ctx); err != nil {
		t.Errorf("Departments after token revocation = %v", err)
	}
	if n := fake.Calls("/cgi-bin/gettoken"); n != 2 {
		t.Errorf("gettoken called %d times; want 2", n)
	}

	var apiErr *idmap.APIError
	if _, err := c.DepartmentUsers(ctx, 99); !errors.As(err, &apiErr) || apiErr.Code != fakewecom.ErrDepartmentMissing {
		t.Errorf("DepartmentUsers(99) = %v; want errcode %d", err, fakewecom.ErrDepartmentMissing)
	}
}

// TestErrorsHideCredentials: neither the secret nor the token may reach an
// error message (they end up in logs).
func TestErrorsHideCredentials(t *testing.T) {
	fake := fakewecom.New(corp())
	url := fakewecom.Start(t, fake)
	ctx := context.Background()
	broken := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusInternalServerError)
	}))
	defer broken.Close()

	tests := []struct {
		name   string
		client *wecomdir.Client
	}{
		{"wrong secret", wecomdir.New("wwcorp", "wrong-secret", url, nil)},
		{"unreachable", wecomdir.New("wwcorp", "top-secret", "http://127.0.0.1:1", nil)},
		{"http 500", wecomdir.New("wwcorp", "top-secret", broken.URL, nil)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := tt.client.Departments(ctx)
			if err == nil {
				t.Fatal("Departments succeeded")
			}
			for _, secret := range []string{"secret", "fake-token"} {
				if strings.Contains(err.Error(), secret) {
					t.Errorf("error %q reveals %q", err, secret)
				}
			}
		})
	}

	// A token rejected after a successful gettoken must not leak either.
	c := wecomdir.New("wwcorp", "top-secret", url, nil)
	if _, err := c.Departments(ctx); err != nil {
		t.Fatal(err)
	}
	fake.SetCorp(fakewecom.Corp{CorpID: "wwcorp", Secret: "rotated"})
	fake.RevokeTokens()
	_, err := c.Departments(ctx)
	if err == nil || strings.Contains(err.Error(), "secret") || strings.Contains(err.Error(), "fake-token") {
		t.Errorf("Departments after rotation = %v; want an error without credentials", err)
	}
}
