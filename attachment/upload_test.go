package attachment

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/access"
	"github.com/yidu-io/yidu/audit"
	"github.com/yidu-io/yidu/content"
)

// TestUploadRows (issue 47): an upload is decided by the upload store
// (access.Decide, fail-closed) before its body is read, and returns the
// rows it is due: the attachment kept, with its id, type and size; a
// refusal with its reason (another app's sender, no caller, no app),
// the file never opened; failed when it could not be kept. What is not
// an acceptable upload, or cannot be opened, is due no row and keeps
// nothing.
func TestUploadRows(t *testing.T) {
	s, db := newStore(t)
	broken, err := New(db, Options{SpoolDir: filepath.Join(t.TempDir(), "gone")})
	if err != nil {
		t.Fatal(err)
	}
	grant := func(apps ...string) *access.Principal {
		return access.NewPrincipal("hr", access.KindToken, false, []access.Grant{{Role: yidu.RoleSender, Scope: yidu.Scope{Corp: corp, Apps: apps}}})
	}
	hrApp := access.Target{Corp: corp, App: "hr"}
	doc := pdf(1000, 'u')
	big := io.MultiReader(bytes.NewReader(pdf(16, 'b')), io.LimitReader(zeros{}, content.MaxAttachmentSize))
	cantOpen := errors.New("multipart body: no part named file")
	tests := []struct {
		name    string
		store   *Store
		p       *access.Principal
		t       access.Target
		r       io.Reader
		openErr error
		want    string // the rows, "{id}" the attachment's
		err     error
		opened  bool
	}{
		{"a sender of the app", s, grant("hr"), hrApp, bytes.NewReader(doc), nil,
			"upload ok hr token sender " + corp + " hr {id} application/pdf 1000 bytes", nil, true},
		{"another app's sender", s, grant("it"), hrApp, bytes.NewReader(doc), nil,
			"upload refused hr token sender " + corp + " hr your role may not send through this app", access.ErrRefused, false},
		{"no caller", s, nil, hrApp, bytes.NewReader(doc), nil,
			"upload refused    " + corp + " hr upload needs a signed-in caller", access.ErrRefused, false},
		{"an unknown app", s, grant("hr"), access.Target{}, bytes.NewReader(doc), nil,
			"upload refused hr token    upload: the corp of the act is unknown", access.ErrRefused, false},
		{"html claiming pdf", s, grant("hr"), hrApp, strings.NewReader("<html><script>alert(1)</script>"), nil, "", yidu.ErrInvalid, true},
		{"too large", s, grant("hr"), hrApp, big, nil, "", ErrTooLarge, true},
		{"not opened", s, grant("hr"), hrApp, nil, cantOpen, "", cantOpen, true},
		{"spool gone", broken, grant("hr"), hrApp, bytes.NewReader(doc), nil, "upload failed hr token sender " + corp + " hr ", errAny, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := count(t, db, "attachments")
			opened := false
			open := func() (string, io.Reader, error) {
				opened = true
				return "评分表.pdf", tc.r, tc.openErr
			}
			a, rows, err := tc.store.Upload(context.Background(), tc.p, tc.t, open)
			if got, want := uploadRows(rows), strings.Replace(tc.want, "{id}", a.ID, 1); tc.want == "" && len(got) != 0 || tc.want != "" && !slices.Equal(got, []string{want}) {
				t.Errorf("Upload rows %q; want %q", got, want)
			}
			switch {
			case tc.err == nil && err != nil, tc.err != nil && err == nil:
				t.Fatalf("Upload = %v; want %v", err, tc.err)
			case tc.err != nil && tc.err != errAny && !errors.Is(err, tc.err):
				t.Errorf("Upload = %v; want %v", err, tc.err)
			}
			if opened != tc.opened {
				t.Errorf("file opened %v; want %v (a refused caller's body is never read)", opened, tc.opened)
			}
			kept := 0
			if tc.err == nil {
				kept = 1
			}
			if n := count(t, db, "attachments"); n != before+kept {
				t.Errorf("%d attachments kept; want %d", n-before, kept)
			}
		})
	}
}

// errAny is any error.
var errAny = errors.New("any error")

// zeros reads zero bytes forever.
type zeros struct{}

func (zeros) Read(p []byte) (int, error) { clear(p); return len(p), nil }

// uploadRows is each row as "action outcome actor kind role corp app
// detail".
func uploadRows(es []audit.Event) []string {
	out := []string{}
	for _, e := range es {
		out = append(out, fmt.Sprintf("%s %s %s %s %s %s %s %s", e.Action, e.Outcome, e.Actor, e.ActorKind, e.Role, e.CorpID, e.App, e.Detail))
	}
	return out
}
