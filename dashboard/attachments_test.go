package dashboard

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"net/textproto"
	"strings"
	"sync"
	"testing"

	"github.com/yidu-io/yidu/attachment"
	"github.com/yidu-io/yidu/content"
)

// fakeAttachments runs the real checks (attachment.Read) and keeps what
// passed them.
type fakeAttachments struct {
	mu   sync.Mutex
	puts []attachment.Attachment
}

func (f *fakeAttachments) Put(_ context.Context, corp, by, name string, r io.Reader) (attachment.Attachment, error) {
	clean, typ, data, err := attachment.Read(name, r)
	if err != nil {
		return attachment.Attachment{}, err
	}
	a := attachment.Attachment{ID: "att_1", SHA256: content.Sum(data).String(), Name: clean, Type: typ, Size: int64(len(data))}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.puts = append(f.puts, a)
	return a, nil
}

// multipartBody is a multipart body with one part: field, file name,
// declared type and data.
func multipartBody(tb testing.TB, field, file, ctype string, data []byte) (string, *bytes.Buffer) {
	tb.Helper()
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	h := textproto.MIMEHeader{}
	h.Set("Content-Disposition", `form-data; name="`+field+`"; filename="`+file+`"`)
	h.Set("Content-Type", ctype)
	pw, err := mw.CreatePart(h)
	if err != nil {
		tb.Fatal(err)
	}
	pw.Write(data)
	mw.Close()
	return mw.FormDataContentType(), &buf
}

func TestUploadAttachment(t *testing.T) {
	store := &fakeAttachments{}
	f := newFixtureOpts(t, false, func(o *deps) { o.Attachments = store })
	pdf := []byte("%PDF-1.7\n1 0 obj\n")
	big := append([]byte("%PDF-1.7\n"), make([]byte, content.MaxAttachmentSize)...)

	tests := []struct {
		name, target, token, field, file, ctype string
		data                                    []byte
		rawType                                 string
		want                                    int
	}{
		{"pdf", "/api/v1/attachments?app=hr", acmeToken, "file", "评分表.pdf", "application/pdf", pdf, "", http.StatusCreated},
		{"html claiming pdf", "/api/v1/attachments?app=hr", acmeToken, "file", "x.pdf", "application/pdf", []byte("<html><script>alert(1)</script>"), "", http.StatusBadRequest},
		{"svg", "/api/v1/attachments?app=hr", acmeToken, "file", "x.svg", "image/svg+xml", []byte(`<svg onload="alert(1)"/>`), "", http.StatusBadRequest},
		{"too large", "/api/v1/attachments?app=hr", acmeToken, "file", "big.pdf", "application/pdf", big, "", http.StatusRequestEntityTooLarge},
		{"no file part", "/api/v1/attachments?app=hr", acmeToken, "other", "a.pdf", "application/pdf", pdf, "", http.StatusBadRequest},
		{"not multipart", "/api/v1/attachments?app=hr", acmeToken, "file", "a.pdf", "application/pdf", pdf, "application/pdf", http.StatusUnsupportedMediaType},
		{"another corp's app", "/api/v1/attachments?app=ops", acmeToken, "file", "a.pdf", "application/pdf", pdf, "", http.StatusForbidden},
		{"no app", "/api/v1/attachments", acmeToken, "file", "a.pdf", "application/pdf", pdf, "", http.StatusForbidden},
		{"no token", "/api/v1/attachments?app=hr", "", "file", "a.pdf", "application/pdf", pdf, "", http.StatusUnauthorized},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			store.puts = nil
			ct, body := multipartBody(t, tt.field, tt.file, tt.ctype, tt.data)
			if tt.rawType != "" {
				ct = tt.rawType
			}
			r := httptest.NewRequest("POST", tt.target, body)
			r.Header.Set("Content-Type", ct)
			if tt.token != "" {
				r.Header.Set("Authorization", "Bearer "+tt.token)
			}
			w := httptest.NewRecorder()
			f.h.ServeHTTP(w, r)
			if w.Code != tt.want {
				t.Fatalf("status %d; want %d: %s", w.Code, tt.want, w.Body)
			}
			if tt.want != http.StatusCreated {
				if len(store.puts) != 0 {
					t.Fatalf("a refused upload was kept: %+v", store.puts)
				}
				return
			}
			var got map[string]any
			if err := json.Unmarshal(w.Body.Bytes(), &got); err != nil {
				t.Fatal(err)
			}
			want := map[string]any{"id": "att_1", "sha256": content.Sum(pdf).String(), "name": "评分表.pdf", "type": "application/pdf", "size": float64(len(pdf))}
			for k, v := range want {
				if got[k] != v {
					t.Errorf("%s = %v; want %v", k, got[k], v)
				}
			}
			if len(got) != len(want) {
				t.Errorf("answer %v has more than %v", got, want)
			}
		})
	}
}

// FuzzUploadAttachment: whatever the multipart body, the answer is 201 or
// a 4xx, and what is kept was typed by its own bytes.
func FuzzUploadAttachment(f *testing.F) {
	_, pdf := multipartBody(f, "file", "a.pdf", "application/pdf", []byte("%PDF-1.7\n"))
	f.Add(pdf.Bytes())
	_, html := multipartBody(f, "file", "a.pdf", "application/pdf", []byte("<script>"))
	f.Add(html.Bytes())
	f.Add([]byte("--B\r\nContent-Disposition: form-data; name=\"file\"; filename=\"../../x\"\r\n\r\n\x89PNG\r\n\x1a\n\r\n--B--\r\n"))
	store := &fakeAttachments{}
	fx := newFixtureOpts(f, false, func(o *deps) { o.Attachments = store })
	f.Fuzz(func(t *testing.T, body []byte) {
		store.puts = nil
		boundary := "B"
		if i := bytes.Index(body, []byte("\r\n")); i > 2 && body[0] == '-' && body[1] == '-' {
			boundary = string(body[2:i])
		}
		r := httptest.NewRequest("POST", "/api/v1/attachments?app=hr", bytes.NewReader(body))
		r.Header.Set("Content-Type", `multipart/form-data; boundary="`+strings.ReplaceAll(boundary, `"`, "")+`"`)
		r.Header.Set("Authorization", "Bearer "+acmeToken)
		w := httptest.NewRecorder()
		fx.h.ServeHTTP(w, r)
		switch {
		case w.Code == http.StatusCreated:
			if len(store.puts) != 1 {
				t.Fatalf("201 with %d uploads kept", len(store.puts))
			}
			a := store.puts[0]
			if !a.Type.Valid() || a.Size > content.MaxAttachmentSize || a.Name == "" || strings.ContainsAny(a.Name, `/\`) {
				t.Fatalf("kept %+v", a)
			}
		case w.Code >= 400 && w.Code < 500:
			if len(store.puts) != 0 {
				t.Fatalf("%d with an upload kept", w.Code)
			}
		default:
			t.Fatalf("status %d: %s", w.Code, w.Body)
		}
	})
}
