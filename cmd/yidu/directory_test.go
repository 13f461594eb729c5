package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/yidu-io/yidu/cmd/internal/process"
	"github.com/yidu-io/yidu/internal/fakewecom"
	"github.com/yidu-io/yidu/internal/testenv"
	"github.com/yidu-io/yidu/page"
)

// TestDirectorySync runs `yidu directory sync --app hr` as an operator
// would, against a fake WeCom reached through wecom.api_base that is as
// strict as WeCom about which secret may call what: with the app's secret
// alone, with the contacts-sync secret, and with secrets in the wrong place.
// The subtests are the steps of one operator's day, in order: each reads
// what the ones before wrote.
func TestDirectorySync(t *testing.T) {
	const corp = "wwdirsync"
	c := fakewecom.Corp{
		CorpID: corp,
		Apps: []fakewecom.App{
			{AgentID: 1000002, Secret: "s3cret"},
			{AgentID: 1000003, Secret: "other-app-secret"},
		},
		ContactsSecret: "contacts-s3cret", ContactsIDsOnly: true,
		Departments: []fakewecom.Department{{ID: 1, Name: "总部"}, {ID: 2, ParentID: 1, Name: "HR"}},
		Users: []fakewecom.User{
			{UserID: "zhangsan", Name: "张三", Departments: []int{1}},
			{UserID: "lisi", Name: "李四", Departments: []int{2}},
			{UserID: "Alice", Name: "Alice", Departments: []int{1, 2}},
		},
	}
	srv := fakewecom.New(c)
	url := fakewecom.Start(t, srv)
	dsn := testenv.MySQLDSN(t)
	cfgPath := filepath.Join(t.TempDir(), "yidu.yaml")
	cfgText := "mysql: {dsn: \"" + dsn + "\"}\nwecom: {api_base: \"" + url + "\"}\n" +
		"apps:\n  - {name: hr, corp_id: " + corp + ", agent_id: 1000002, token: t0k, encoding_aes_key: jWmYm7qr5nMoAUwZRjGtBxmz3KA1tkAj3ykkR6q2B2C}\n"
	if err := os.WriteFile(cfgPath, []byte(cfgText), 0o600); err != nil {
		t.Fatal(err)
	}
	db, err := process.OpenDB(dsn)
	testenv.Check(t, "open", err)
	defer db.Close()
	sync := func(t *testing.T, env map[string]string) (string, error) {
		t.Helper()
		out, _, err := runCmd(t, env, "", "directory", "sync", "--app", "hr", "--config", cfgPath)
		return out, err
	}

	t.Run("app secret alone", func(t *testing.T) {
		listID := srv.Calls("/cgi-bin/user/list_id")
		out, err := sync(t, map[string]string{"YIDU_APP_HR_SECRET": "s3cret"})
		if err != nil {
			t.Fatalf("directory sync: %v", err)
		}
		for _, want := range []string{"departments=2 users=3 created=3", "app secret", "complete view"} {
			if !strings.Contains(out, want) {
				t.Errorf("directory sync printed %q; want %q", out, want)
			}
		}
		if n := srv.Calls("/cgi-bin/user/list_id") - listID; n != 0 {
			t.Errorf("user/list_id called %d times with the app secret alone; want 0", n)
		}
		var name string
		if err := db.QueryRowContext(context.Background(), "SELECT name FROM users WHERE corp_id = ? AND userid = 'lisi'", corp).Scan(&name); err != nil || name != "李四" {
			t.Errorf("users.lisi name = %q, %v; want 李四", name, err)
		}
	})

	t.Run("app secret, part of the corp visible", func(t *testing.T) {
		narrow := c
		narrow.Apps = []fakewecom.App{{AgentID: 1000002, Secret: "s3cret", VisibleDepartments: []int{2}}}
		srv.SetCorp(narrow)
		defer srv.SetCorp(c)
		out, err := sync(t, map[string]string{"YIDU_APP_HR_SECRET": "s3cret"})
		if err != nil {
			t.Fatalf("directory sync: %v", err)
		}
		for _, want := range []string{"left=0", "partial view", "1 active member(s) not listed", "e.g. zhangsan", "YIDU_APP_HR_CONTACTS_SECRET"} {
			if !strings.Contains(out, want) {
				t.Errorf("directory sync printed %q; want %q", out, want)
			}
		}
	})

	t.Run("contacts-sync secret", func(t *testing.T) {
		listID := srv.Calls("/cgi-bin/user/list_id")
		out, err := sync(t, map[string]string{"YIDU_APP_HR_SECRET": "s3cret", "YIDU_APP_HR_CONTACTS_SECRET": "contacts-s3cret"})
		if err != nil {
			t.Fatalf("directory sync: %v", err)
		}
		if !strings.Contains(out, "contacts-sync secret") || !strings.Contains(out, "complete view") {
			t.Errorf("directory sync printed %q; want the contacts-sync secret and a complete view", out)
		}
		if n := srv.Calls("/cgi-bin/user/list_id") - listID; n != 1 {
			t.Errorf("user/list_id called %d times; want 1", n)
		}
	})

	tests := []struct {
		name   string
		env    map[string]string
		want   []string
		hidden string
	}{
		{"wrong secret", map[string]string{"YIDU_APP_HR_SECRET": "wrong-secret-value"},
			[]string{"gettoken", "40001", "app's secret"}, "wrong-secret-value"},
		{"an app's secret as the contacts secret",
			map[string]string{"YIDU_APP_HR_SECRET": "s3cret", "YIDU_APP_HR_CONTACTS_SECRET": "other-app-secret"},
			[]string{"user/list_id", "48002", "needs the contacts-sync secret", "YIDU_APP_HR_CONTACTS_SECRET"}, "other-app-secret"},
		{"the app's secret as the contacts secret",
			map[string]string{"YIDU_APP_HR_SECRET": "s3cret", "YIDU_APP_HR_CONTACTS_SECRET": "s3cret"},
			[]string{"contacts_secret", "contacts-sync secret"}, "s3cret"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := sync(t, tt.env)
			if err == nil {
				t.Fatal("directory sync succeeded; want an error")
			}
			for _, want := range tt.want {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not say %q", err, want)
				}
			}
			if strings.Contains(err.Error(), tt.hidden) {
				t.Errorf("error %q reveals the secret", err)
			}
		})
	}
}

// TestDirectorySyncEndsReadingSessions: `yidu directory sync` that finds a
// member gone ends their reading page sessions in Redis and marks the
// revocation, so a receiver's sign-in answered from its roster (idmap)
// asks MySQL for them (issue 50).
func TestDirectorySyncEndsReadingSessions(t *testing.T) {
	const corp = "wwdirsess"
	c := fakewecom.Corp{
		CorpID:      corp,
		Apps:        []fakewecom.App{{AgentID: 1000002, Secret: "s3cret"}},
		Departments: []fakewecom.Department{{ID: 1, Name: "总部"}},
		Users: []fakewecom.User{
			{UserID: "zhangsan", Name: "张三", Departments: []int{1}},
			{UserID: "lisi", Name: "李四", Departments: []int{1}},
		},
	}
	srv := fakewecom.New(c)
	url := fakewecom.Start(t, srv)
	dsn := testenv.MySQLDSN(t)
	rdb, prefix := testenv.Redis(t)
	cfgPath := filepath.Join(t.TempDir(), "yidu.yaml")
	cfgText := "mysql: {dsn: \"" + dsn + "\"}\nwecom: {api_base: \"" + url + "\"}\n" +
		"redis: {addr: \"" + testenv.RedisAddr(t) + "\", prefix: \"" + prefix + "\"}\n" +
		"apps:\n  - {name: hr, corp_id: " + corp + ", agent_id: 1000002, token: t0k, encoding_aes_key: jWmYm7qr5nMoAUwZRjGtBxmz3KA1tkAj3ykkR6q2B2C}\n"
	if err := os.WriteFile(cfgPath, []byte(cfgText), 0o600); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"YIDU_APP_HR_SECRET": "s3cret"}
	if _, _, err := runCmd(t, env, "", "directory", "sync", "--app", "hr", "--config", cfgPath); err != nil {
		t.Fatalf("directory sync: %v", err)
	}
	db, err := process.OpenDB(dsn)
	testenv.Check(t, "open", err)
	defer db.Close()
	ctx := context.Background()
	var uid uint32
	if err := db.QueryRowContext(ctx, "SELECT uid FROM users WHERE corp_id = ? AND userid = 'lisi'", corp).Scan(&uid); err != nil {
		t.Fatal(err)
	}
	if _, err := page.NewSessions(rdb, prefix, 0).Create(ctx, corp, "lisi", uid, "李四"); err != nil {
		t.Fatal(err)
	}

	// lisi is gone from the corp.
	gone := c
	gone.Users = c.Users[:1]
	srv.SetCorp(gone)
	out, _, err := runCmd(t, env, "", "directory", "sync", "--app", "hr", "--config", cfgPath)
	if err != nil || !strings.Contains(out, "left=1") {
		t.Fatalf("directory sync = %q, %v; want left=1", out, err)
	}
	if keys, err := rdb.Keys(ctx, prefix+"page:session:*").Result(); err != nil || len(keys) != 0 {
		t.Errorf("reading sessions after the sync: %v, %v; want none", keys, err)
	}
	if n, err := rdb.Exists(ctx, fmt.Sprintf("%spage:revoked:{%s}:%d", prefix, corp, uid)).Result(); err != nil || n != 1 {
		t.Errorf("revocation mark of lisi: %d, %v; want 1", n, err)
	}
}
