package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/yidu-io/yidu/cmd/internal/process"
	"github.com/yidu-io/yidu/internal/fakewecom"
	"github.com/yidu-io/yidu/internal/testenv"
)

// TestDirectorySync runs `yidu directory sync --app hr` as an operator
// would, against a fake WeCom reached through wecom.api_base.
func TestDirectorySync(t *testing.T) {
	const corp = "wwdirsync"
	srv := fakewecom.New(fakewecom.Corp{
		CorpID: corp, Apps: []fakewecom.App{{AgentID: 1000002, Secret: "s3cret"}},
		Departments: []fakewecom.Department{{ID: 1, Name: "总部"}, {ID: 2, ParentID: 1, Name: "HR"}},
		Users: []fakewecom.User{
			{UserID: "zhangsan", Name: "张三", Departments: []int{1}},
			{UserID: "lisi", Name: "李四", Departments: []int{2}},
			{UserID: "Alice", Name: "Alice", Departments: []int{1, 2}},
		},
	})
	url := fakewecom.Start(t, srv)
	dsn := testenv.MySQLDSN(t)
	cfgPath := filepath.Join(t.TempDir(), "yidu.yaml")
	cfgText := "mysql: {dsn: \"" + dsn + "\"}\nwecom: {api_base: \"" + url + "\"}\n" +
		"apps:\n  - {name: hr, corp_id: " + corp + ", agent_id: 1000002, token: t0k, encoding_aes_key: jWmYm7qr5nMoAUwZRjGtBxmz3KA1tkAj3ykkR6q2B2C}\n"
	if err := os.WriteFile(cfgPath, []byte(cfgText), 0o600); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"YIDU_APP_HR_SECRET": "s3cret"}

	out, _, err := runCmd(t, env, "", "directory", "sync", "--app", "hr", "--config", cfgPath)
	if err != nil {
		t.Fatalf("directory sync: %v", err)
	}
	if !strings.Contains(out, "departments=2 users=3 created=3") {
		t.Errorf("directory sync printed %q; want departments=2 users=3 created=3", out)
	}
	db, err := process.OpenDB(dsn)
	testenv.Check(t, "open", err)
	defer db.Close()
	var name string
	if err := db.QueryRowContext(context.Background(), "SELECT name FROM users WHERE corp_id = ? AND userid = 'lisi'", corp).Scan(&name); err != nil || name != "李四" {
		t.Errorf("users.lisi name = %q, %v; want 李四", name, err)
	}
	// A wrong secret is refused and says so without printing it.
	env["YIDU_APP_HR_SECRET"] = "wrong-secret-value"
	_, _, err = runCmd(t, env, "", "directory", "sync", "--app", "hr", "--config", cfgPath)
	if err == nil || strings.Contains(err.Error(), "wrong-secret-value") {
		t.Errorf("sync with a wrong secret = %v; want an error that hides the secret", err)
	}
}
