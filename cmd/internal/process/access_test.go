package process

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/yidu-io/yidu/cmd/internal/config"
	"github.com/yidu-io/yidu/idmap"
	"github.com/yidu-io/yidu/internal/fakewecom"
	"github.com/yidu-io/yidu/internal/testenv"
	"github.com/yidu-io/yidu/wecom"
)

const viewerToken = "viewer-of-research-0123456789"

// TestServeAccessFromConfig: what yidu.yaml says of roles reaches every
// process as configured. A viewer token of department 2 sees exactly
// department 2's part of a notice and nothing of another notice; the
// receiver and the dashboard both serve WeCom's domain verification
// file; sign-in with WeCom starts at the configured hosts and returns
// to dashboard.public_url, whatever Host the request names.
func TestServeAccessFromConfig(t *testing.T) {
	fake := fakewecom.New(campaignCorp())
	base := fakewecom.Start(t, fake)
	verify := filepath.Join(t.TempDir(), "WW_verify_Zx81Ab.txt")
	if err := os.WriteFile(verify, []byte("Zx81AbVerify"), 0o600); err != nil {
		t.Fatal(err)
	}
	m := mustRunMainWith(t, func(c *config.Config) {
		c.WeCom.APIBase = base
		c.WeCom.OAuthBase = base
		c.WeCom.LoginBase = base + "/"
		c.WeCom.VerifyFile = verify
		c.Apps[0].Secret = campaignSecret
		c.Dashboard.PublicURL = "https://yidu.example.com"
		c.Dashboard.Tokens = append(c.Dashboard.Tokens, config.Token{Name: "research-viewer", Token: viewerToken, Grant: config.Grant{Role: "viewer", Corp: testCorp, Departments: []int64{2}}})
	})
	dir, err := wecom.NewDirectory(wecom.App{CorpID: testCorp, AgentID: testAgent, Secret: campaignSecret}, wecom.DirectoryOptions{})
	testenv.Check(t, "NewDirectory", err)
	s, err := idmap.NewSyncer(m.Mapper, map[string]idmap.Directory{testCorp: dir}, idmap.Options{Registerer: prometheus.NewRegistry()})
	testenv.Check(t, "NewSyncer", err)
	if _, err := s.Sync(context.Background(), testCorp); err != nil {
		t.Fatalf("directory sync: %v", err)
	}
	sentAt := time.Now().Add(-time.Minute).UTC().Truncate(time.Second)
	for id, who := range map[string][]string{"all-hands": {"zhangsan", "lisi", "wangwu", "mallory"}, "sales-only": {"mallory"}} {
		reg := map[string]any{"msgid": id, "app": "hr", "title": "年度政策", "sent_at": sentAt, "audience": map[string]any{"userids": who}}
		if code := api(t, m, "POST", "/messages", reg, nil); code != http.StatusCreated {
			t.Fatalf("register %s = %d", id, code)
		}
	}
	for _, u := range []string{"lisi", "mallory"} {
		if code := deliver(t, m, cardEvent(u, "all-hands@0", sentAt.Unix()+5)); code != http.StatusOK {
			t.Fatalf("press %s = %d", u, code)
		}
	}

	get := func(token, path string) (int, map[string]any) {
		t.Helper()
		req, _ := http.NewRequest("GET", "http://"+m.DashboardAddr+"/api/v1"+path, nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&out)
		return resp.StatusCode, out
	}
	// The viewer: department 2 (lisi read, wangwu not) of all-hands.
	code, p := get(viewerToken, "/messages/all-hands/progress")
	if code != http.StatusOK || p["recipients"] != float64(2) || p["read"] != float64(1) {
		t.Errorf("viewer's progress = %d %v; want 200 with 2 recipients, 1 read", code, p)
	}
	if code, _ := get(viewerToken, "/messages/sales-only/progress"); code != http.StatusNotFound {
		t.Errorf("viewer's progress of a notice outside the scope = %d; want 404", code)
	}
	code, p = get(apiToken, "/messages/all-hands/progress")
	if code != http.StatusOK || p["recipients"] != float64(4) || p["read"] != float64(2) {
		t.Errorf("admin's progress = %d %v; want 4 recipients, 2 read", code, p)
	}

	// The configured roles were recorded as role changes at start.
	var detail string
	if err := m.DB.QueryRow("SELECT detail FROM audit_events WHERE action = 'role_change' AND detail LIKE '%research-viewer'").Scan(&detail); err != nil ||
		detail != "grant viewer departments=2 of "+testCorp+" to token research-viewer" {
		t.Errorf("role_change of the viewer token = %q, %v", detail, err)
	}

	noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for _, addr := range []string{m.ReceiverAddr, m.DashboardAddr} {
		resp, err := http.Get("http://" + addr + "/WW_verify_Zx81Ab.txt")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || string(b) != "Zx81AbVerify" {
			t.Errorf("%s: verification file = %d %q", addr, resp.StatusCode, b)
		}
		if resp, err := http.Get("http://" + addr + "/WW_verify_other.txt"); err != nil || resp.StatusCode != http.StatusNotFound {
			t.Errorf("%s: another verification file = %v %v; want 404", addr, resp.StatusCode, err)
		}
	}

	req, _ := http.NewRequest("GET", "http://"+m.DashboardAddr+"/login/wecom?next=/m/all-hands", nil)
	req.Host = "evil.example"
	req.Header.Set("User-Agent", "Mozilla/5.0 wxwork/4.1.20")
	resp, err := noFollow.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	to := resp.Header.Get("Location")
	want := base + "/connect/oauth2/authorize?"
	if resp.StatusCode != http.StatusFound || len(to) < len(want) || to[:len(want)] != want {
		t.Fatalf("sign-in inside WeCom = %d to %q; want the configured oauth_base", resp.StatusCode, to)
	}
	u, _ := http.NewRequest("GET", to, nil)
	if got := u.URL.Query().Get("redirect_uri"); got != "https://yidu.example.com/login/wecom/callback" {
		t.Errorf("redirect_uri = %q; want dashboard.public_url's", got)
	}
}
