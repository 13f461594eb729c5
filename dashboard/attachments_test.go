package dashboard

import (
	"bytes"
	"database/sql"
	"encoding/json"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"net/textproto"
	"slices"
	"strings"
	"testing"

	"github.com/yidu-io/yidu/attachment"
	"github.com/yidu-io/yidu/content"
	"github.com/yidu-io/yidu/internal/testenv"
)

// uploads is the real upload store on a MariaDB database of its own,
// and how many attachments it keeps.
type uploads struct {
	*attachment.Store
	db *sql.DB
}

func newUploads(tb testing.TB) uploads {
	tb.Helper()
	db := testenv.MySQL(tb)
	st, err := attachment.New(db, attachment.Options{})
	testenv.Check(tb, "attachment.New", err)
	return uploads{Store: st, db: db}
}

// kept is how many attachments the store keeps.
func (u uploads) kept(tb testing.TB) int {
	tb.Helper()
	return testenv.Column[int](tb, u.db, "SELECT COUNT(*) FROM attachments")[0]
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

// TestUploadAttachment: the upload store's answers translated (201 with
// the attachment; 400, 413 and 415 for what is not an acceptable upload;
// 403 with the refusal's words, before the body is read) and the rows
// it returned written as given: the upload's, a refusal's; none for
// hostile input.
func TestUploadAttachment(t *testing.T) {
	store := newUploads(t)
	rec := &recorderFake{}
	f := newFixtureOpts(t, false, func(o *deps) { o.Attachments = store; o.Audit = rec })
	pdf := []byte("%PDF-1.7\n1 0 obj\n")
	big := append([]byte("%PDF-1.7\n"), make([]byte, content.MaxAttachmentSize)...)
	kept := "upload ok acme acme hr {id} application/pdf 17 bytes"
	refused := func(corp, app, why string) string { return "upload refused acme " + corp + " " + app + " " + why }

	tests := []struct {
		name, target, token, field, file, ctype string
		data                                    []byte
		rawType                                 string
		want                                    int
		row                                     string // "": none
	}{
		{"pdf", "/api/v1/attachments?app=hr", acmeToken, "file", "评分表.pdf", "application/pdf", pdf, "", http.StatusCreated, kept},
		{"html claiming pdf", "/api/v1/attachments?app=hr", acmeToken, "file", "x.pdf", "application/pdf", []byte("<html><script>alert(1)</script>"), "", http.StatusBadRequest, ""},
		{"svg", "/api/v1/attachments?app=hr", acmeToken, "file", "x.svg", "image/svg+xml", []byte(`<svg onload="alert(1)"/>`), "", http.StatusBadRequest, ""},
		{"too large", "/api/v1/attachments?app=hr", acmeToken, "file", "big.pdf", "application/pdf", big, "", http.StatusRequestEntityTooLarge, ""},
		{"no file part", "/api/v1/attachments?app=hr", acmeToken, "other", "a.pdf", "application/pdf", pdf, "", http.StatusBadRequest, ""},
		{"not multipart", "/api/v1/attachments?app=hr", acmeToken, "file", "a.pdf", "application/pdf", pdf, "application/pdf", http.StatusUnsupportedMediaType, ""},
		{"another corp's app", "/api/v1/attachments?app=ops", acmeToken, "file", "a.pdf", "application/pdf", pdf, "", http.StatusForbidden,
			refused("other", "ops", "your role may not send through this app")},
		{"another corp's app, not multipart", "/api/v1/attachments?app=ops", acmeToken, "file", "a.pdf", "application/pdf", pdf, "text/plain", http.StatusForbidden,
			refused("other", "ops", "your role may not send through this app")},
		{"no app", "/api/v1/attachments", acmeToken, "file", "a.pdf", "application/pdf", pdf, "", http.StatusForbidden,
			refused("", "", "upload: the corp of the act is unknown")},
		{"no token", "/api/v1/attachments?app=hr", "", "file", "a.pdf", "application/pdf", pdf, "", http.StatusUnauthorized, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := store.kept(t)
			rec.events = nil
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
			var answer attachment.Attachment
			_ = json.Unmarshal(w.Body.Bytes(), &answer)
			var rows []string
			for _, e := range rec.events {
				rows = append(rows, strings.Join([]string{string(e.Action), e.Outcome, e.Actor, e.CorpID, e.App, e.Detail}, " "))
			}
			if want := strings.Replace(tt.row, "{id}", answer.ID, 1); tt.row == "" && len(rows) != 0 || tt.row != "" && !slices.Equal(rows, []string{want}) {
				t.Errorf("rows %q; want %q", rows, want)
			}
			if tt.want != http.StatusCreated {
				if n := store.kept(t); n != before {
					t.Fatalf("a refused upload was kept: %d attachments, %d before", n, before)
				}
				if tt.want == http.StatusForbidden && !strings.Contains(w.Body.String(), "your role may not send") && !strings.Contains(w.Body.String(), "unknown") {
					t.Errorf("refusal %s; want its reason", w.Body)
				}
				return
			}
			var got map[string]any
			if err := json.Unmarshal(w.Body.Bytes(), &got); err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(answer.ID, "att_") || store.kept(t) != before+1 {
				t.Errorf("id %q, %d attachments after %d; want att_… kept", answer.ID, store.kept(t), before)
			}
			want := map[string]any{"id": got["id"], "sha256": content.Sum(pdf).String(), "name": "评分表.pdf", "type": "application/pdf", "size": float64(len(pdf))}
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
	store := newUploads(f)
	fx := newFixtureOpts(f, false, func(o *deps) { o.Attachments = store })
	f.Fuzz(func(t *testing.T, body []byte) {
		before := store.kept(t)
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
			var a attachment.Attachment
			if err := json.Unmarshal(w.Body.Bytes(), &a); err != nil || store.kept(t) != before+1 {
				t.Fatalf("201 with %d uploads kept (%d before): %v", store.kept(t), before, err)
			}
			if !a.Type.Valid() || a.Size > content.MaxAttachmentSize || a.Name == "" || strings.ContainsAny(a.Name, `/\`) {
				t.Fatalf("kept %+v", a)
			}
		case w.Code >= 400 && w.Code < 500:
			if n := store.kept(t); n != before {
				t.Fatalf("%d with an upload kept", w.Code)
			}
		default:
			t.Fatalf("status %d: %s", w.Code, w.Body)
		}
	})
}
