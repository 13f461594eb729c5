package pagereader

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestReaderKeepsCookiesAndHeaders: the reader sends the cookies the
// receiver set (a deleted one no longer), its own headers, and reads the
// view and version off the page.
func TestReaderKeepsCookiesAndHeaders(t *testing.T) {
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = append(got, r.Method+" "+r.URL.Path+" cookie="+r.Header.Get("Cookie")+" xff="+r.Header.Get("X-Forwarded-For"))
		switch {
		case r.URL.Path == "/r/app/m1" && r.Header.Get("Cookie") == "":
			http.SetCookie(w, &http.Cookie{Name: "nonce", Value: "n1", Path: "/r/"})
			http.Redirect(w, r, "https://wecom.example/oauth?state=s1", http.StatusFound)
		case r.URL.Path == "/r/app/signin":
			if r.URL.Query().Get("code") != "c1" || r.URL.Query().Get("state") != "s1" {
				http.Error(w, "bad", http.StatusBadRequest)
				return
			}
			http.SetCookie(w, &http.Cookie{Name: "nonce", Path: "/r/", MaxAge: -1})
			http.SetCookie(w, &http.Cookie{Name: "sess", Value: "v1", Path: "/r/"})
			http.Redirect(w, r, "/r/app/m1", http.StatusFound)
		case r.URL.Path == "/r/app/m1":
			w.Write([]byte(`<main data-view="tok&amp;1" data-version="3">`))
		case r.URL.Path == "/r/app/m1/events":
			w.Write([]byte(`{"ok":true}`))
		}
	}))
	defer srv.Close()
	rd := New(srv.URL, "app", "m1", 5*time.Second)
	rd.SetHeader("X-Forwarded-For", "10.0.0.7")
	if err := rd.Open(context.Background(), func() string { return "c1" }); err != nil {
		t.Fatalf("open: %v", err)
	}
	if rd.View != "tok&1" || rd.Version != 3 {
		t.Fatalf("view %q version %d; want tok&1, 3", rd.View, rd.Version)
	}
	if err := rd.Signal(context.Background(), "read_to_end"); err != nil {
		t.Fatalf("signal: %v", err)
	}
	want := []string{
		"GET /r/app/m1 cookie= xff=10.0.0.7",
		"GET /r/app/signin cookie=nonce=n1 xff=10.0.0.7",
		"GET /r/app/m1 cookie=sess=v1 xff=10.0.0.7",
		"POST /r/app/m1/events cookie=sess=v1 xff=10.0.0.7",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("requests:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestAttr(t *testing.T) {
	for _, c := range []struct {
		page, name, want string
		ok               bool
	}{
		{`<a data-view="x1" data-version="2">`, "data-view", "x1", true},
		{`<a data-view="x1" data-version="2">`, "data-version", "2", true},
		{`<a data-view="">`, "data-view", "", false},
		{`<a data-view="x1`, "data-view", "", false},
		{`<a>`, "data-view", "", false},
	} {
		got, ok := attr([]byte(c.page), c.name)
		if got != c.want || ok != c.ok {
			t.Errorf("attr(%q, %q) = %q, %v; want %q, %v", c.page, c.name, got, ok, c.want, c.ok)
		}
	}
}
