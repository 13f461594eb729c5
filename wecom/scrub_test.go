package wecom

import (
	"strings"
	"testing"
)

// FuzzScrub: whatever text silenceper or WeCom put in an error (errmsg is
// outside input), scrubbing leaves no secret and no credential parameter.
func FuzzScrub(f *testing.F) {
	for _, s := range []string{
		"http get error : uri=https://qyapi.weixin.qq.com/cgi-bin/gettoken?corpid=ww&corpsecret=top-secret , statusCode=500",
		"Get \"http://127.0.0.1:1/cgi-bin/user/list_id?access_token=tok\": EOF",
		"invalid credential, hint: [x], from ip: 1.2.3.4, more info at https://open.work.weixin.qq.com/devtool/query?e=40001",
		"http://h/a%3Faccess_token%3Dtok%26corpsecret%3Dtop-secret",
		"ACCESS_TOKEN=x CorpSecret=top-secret",
	} {
		f.Add(s)
	}
	c := NewCredentials("ww", "top-secret")
	f.Fuzz(func(t *testing.T, s string) {
		got := c.Scrub(s)
		if strings.Contains(got, "top-secret") {
			t.Errorf("Scrub(%q) = %q; contains the secret", s, got)
		}
		for _, param := range []string{"access_token=", "corpsecret="} {
			if strings.Contains(strings.ToLower(got), param) {
				t.Errorf("Scrub(%q) = %q; contains %q", s, got, param)
			}
		}
	})
}

func TestScrub(t *testing.T) {
	c := NewCredentials("ww", "top-secret")
	tests := []struct{ in, want string }{
		{"http get error : uri=https://qyapi.weixin.qq.com/cgi-bin/gettoken?corpid=ww&corpsecret=top-secret , statusCode=500",
			"http get error : uri=https://qyapi.weixin.qq.com/cgi-bin/gettoken , statusCode=500"},
		{"errcode=60003 , errmsg=department not found", "errcode=60003 , errmsg=department not found"},
		{"token access_token=abc&x=1", "token <redacted>&x=1"},
		{"echo top-secret", "echo <redacted>"},
		// An OAuth code is a credential too; errcode is not one.
		{"getuserinfo?x=1 code=abc&y=2 errcode=40029", "getuserinfo?x=1 <redacted>&y=2 errcode=40029"},
	}
	for _, tt := range tests {
		if got := c.Scrub(tt.in); got != tt.want {
			t.Errorf("Scrub(%q) = %q; want %q", tt.in, got, tt.want)
		}
	}
}
