package content

import (
	"errors"
	"strings"
	"testing"

	"golang.org/x/net/html"

	"github.com/yidu-io/yidu"
)

func TestRender(t *testing.T) {
	tests := []struct {
		name      string
		in        string
		want      []string // substrings the HTML must have
		wantNot   []string // substrings it must not have
		wantError bool
	}{
		{name: "heading and paragraph", in: "# 绩效考核办法\n\n第四条 考核周期为一年。",
			want: []string{"<h1>绩效考核办法</h1>", "<p>第四条 考核周期为一年。</p>"}},
		{name: "no id to clobber the page's own", in: "# ack\n\n<p id=\"notice-end\">x</p>\n\n[a](#ack)", wantNot: []string{"id="}},
		{name: "table with alignment", in: "| 等级 | 分数 |\n|:--|--:|\n| A | 90 |\n",
			want: []string{"<table>", `<th align="left">等级</th>`, `<td align="right">90</td>`}},
		{name: "raw script", in: "<script>alert(1)</script>\n\nok", want: []string{"<p>ok</p>"}, wantNot: []string{"<script", "alert"}},
		{name: "inline event handler", in: `<p onclick="x()">hi</p> <b onmouseover=x>b</b>`, wantNot: []string{"onclick", "onmouseover"}},
		{name: "remote image", in: "![x](https://evil.example/p.png)", wantNot: []string{"<img", "evil.example"}},
		{name: "raw image", in: `<img src=x onerror=alert(1)>`, wantNot: []string{"<img", "onerror"}},
		{name: "javascript link", in: "[a](javascript:alert(1))", wantNot: []string{"javascript"}},
		{name: "data link", in: "[a](data:text/html;base64,PHNjcmlwdD4=)", wantNot: []string{"data:"}},
		{name: "https link", in: "[制度](https://hr.example.com/a)",
			want: []string{`href="https://hr.example.com/a"`, `rel="nofollow noreferrer noopener"`, `target="_blank"`}},
		{name: "style and iframe", in: "<style>p{}</style><iframe src=x></iframe>", wantNot: []string{"<style", "<iframe"}},
		{name: "too large", in: strings.Repeat("a", MaxMarkdown+1), wantError: true},
		{name: "invalid utf-8", in: "a\xffb", wantError: true},
		{name: "at the limit", in: strings.Repeat("a", MaxMarkdown), want: []string{"<p>aaa"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Render(tt.in)
			if tt.wantError {
				if !errors.Is(err, yidu.ErrInvalid) {
					t.Fatalf("Render = %v; want ErrInvalid", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Render: %v", err)
			}
			for _, w := range tt.want {
				if !strings.Contains(got, w) {
					t.Errorf("Render(%.40q) = %.300q; want it to contain %q", tt.in, got, w)
				}
			}
			for _, w := range tt.wantNot {
				if strings.Contains(got, w) {
					t.Errorf("Render(%.40q) = %.300q; must not contain %q", tt.in, got, w)
				}
			}
		})
	}
}

func TestSniff(t *testing.T) {
	tests := []struct {
		name string
		head string
		want Type
	}{
		{"pdf", "%PDF-1.7\n", TypePDF},
		{"png", "\x89PNG\r\n\x1a\n\x00\x00", TypePNG},
		{"jpeg", "\xFF\xD8\xFF\xE0\x00\x10JFIF", TypeJPEG},
		{"html named pdf", "<html><script>", ""},
		{"svg", "<svg xmlns=", ""},
		{"empty", "", ""},
		{"pdf later", " %PDF-1.7", ""},
	}
	for _, tt := range tests {
		got, err := Sniff([]byte(tt.head))
		if got != tt.want || (tt.want == "") != errors.Is(err, yidu.ErrInvalid) {
			t.Errorf("%s: Sniff(%q) = %q, %v; want %q", tt.name, tt.head, got, err, tt.want)
		}
	}
}

func TestCleanName(t *testing.T) {
	tests := []struct{ in, want string }{
		{"评分表.pdf", "评分表.pdf"},
		{`C:\Users\hr\评分表.pdf`, "评分表.pdf"},
		{"../../etc/passwd", "passwd"},
		{"a\r\nb\x00.pdf", "ab.pdf"},
		{"\u202egpj.exe", "gpj.exe"},
		{"  ", ""},
		{"dir/", ""},
		{strings.Repeat("长", 86), ""}, // 258 bytes
	}
	for _, tt := range tests {
		got, err := CleanName(tt.in)
		if got != tt.want || (tt.want == "") != (err != nil) {
			t.Errorf("CleanName(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
		}
	}
}

// TestVersionHash pins the canonical form docs/api.md documents: a change
// here changes every stored version's hash.
func TestVersionHash(t *testing.T) {
	a := Sum([]byte("%PDF-1.7 scoring table"))
	got := VersionHash("2026年度绩效考核办法", "<p>第四条</p>\n", []Hash{a})
	want := Sum([]byte("yidu-notice-version:1\ntitle:28:2026年度绩效考核办法\ntext:17:<p>第四条</p>\n\nattachments:1\n" + a.String() + "\n"))
	if got != want {
		t.Fatalf("VersionHash = %s; want %s", got, want)
	}
	// The length prefix keeps the title and the text apart.
	if VersionHash("a\ntext:1:b", "", nil) == VersionHash("a", "b", nil) {
		t.Fatal("VersionHash collides across the title/text boundary")
	}
	if VersionHash("t", "x", []Hash{a, Sum(nil)}) == VersionHash("t", "x", []Hash{Sum(nil), a}) {
		t.Fatal("VersionHash ignores the attachments' order")
	}
	if _, err := ParseHash(got.String()); err != nil {
		t.Fatalf("ParseHash(%s): %v", got, err)
	}
	for _, bad := range []string{"", strings.ToUpper(got.String()), got.String()[:63], got.String()[:63] + "g"} {
		if _, err := ParseHash(bad); err == nil {
			t.Errorf("ParseHash(%q) = nil error", bad)
		}
	}
}

// FuzzRender: whatever the Markdown, the HTML has no script, style,
// embedded object or image, no event handler or style attribute, and no
// link outside http, https, mailto and relative URLs.
func FuzzRender(f *testing.F) {
	for _, s := range []string{
		"# t\n\n| a | b |\n|---|---|\n| 1 | 2 |",
		"<script>alert(1)</script>", `<a href="javascript:x" onclick=y>z</a>`,
		"![i](http://x/y.png)", "[l](JaVaScRiPt:alert(1))", "<svg onload=x>", "<img src=x onerror=y>",
		"[x](<javascript:a>)", "<details open ontoggle=x>", "`<script>`", "<!-- x --><scr<script>ipt>",
		"[a]: javascript:x\n\n[a]", "<a href='&#106;avascript:x'>j</a>",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		out, err := Render(in)
		if err != nil {
			if !errors.Is(err, yidu.ErrInvalid) {
				t.Fatalf("Render(%q): %v is not ErrInvalid", in, err)
			}
			return
		}
		checkSafe(t, in, out)
		// Rendering is stable: the version hash depends on it.
		if again, _ := Render(in); again != out {
			t.Fatalf("Render(%q) is not deterministic", in)
		}
	})
}

var allowed = map[string]bool{
	"p": true, "br": true, "hr": true, "h1": true, "h2": true, "h3": true, "h4": true, "h5": true, "h6": true,
	"ul": true, "ol": true, "li": true, "blockquote": true, "pre": true, "code": true, "em": true, "strong": true,
	"del": true, "s": true, "table": true, "thead": true, "tbody": true, "tr": true, "th": true, "td": true, "a": true,
	// html.Parse adds these around any fragment.
	"html": true, "head": true, "body": true,
}

func checkSafe(t *testing.T, in, out string) {
	t.Helper()
	doc, err := html.Parse(strings.NewReader(out))
	if err != nil {
		t.Fatalf("parse Render(%q): %v", in, err)
	}
	var walk func(n *html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.ElementNode {
			if !allowed[n.Data] {
				t.Fatalf("Render(%q) = %q: element <%s> survived", in, out, n.Data)
			}
			for _, a := range n.Attr {
				k := strings.ToLower(a.Key)
				if strings.HasPrefix(k, "on") || k == "style" || k == "src" || k == "srcset" || k == "id" || k == "name" {
					t.Fatalf("Render(%q) = %q: attribute %s survived", in, out, a.Key)
				}
				if k == "href" {
					v := strings.ToLower(strings.TrimSpace(a.Val))
					if i := strings.IndexAny(v, ":/?#"); i >= 0 && v[i] == ':' &&
						!strings.HasPrefix(v, "http:") && !strings.HasPrefix(v, "https:") && !strings.HasPrefix(v, "mailto:") {
						t.Fatalf("Render(%q) = %q: link %q survived", in, out, a.Val)
					}
				}
			}
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(doc)
}
