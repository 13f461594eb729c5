package compose

import (
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"

	"github.com/yidu-io/yidu/access"
	"github.com/yidu-io/yidu/attachment"
	"github.com/yidu-io/yidu/audit"
	"github.com/yidu-io/yidu/content"
	"github.com/yidu-io/yidu/dashboard/internal/handle"
)

// Attachments keeps the uploads of a notice's attachments
// (attachment.Store): it decides who may upload, checks the limits and
// sniffs the type, and returns the audit rows an upload is due; the
// handler only finds the file part.
type Attachments interface {
	Upload(ctx context.Context, p *access.Principal, t access.Target, open attachment.File) (attachment.Attachment, []audit.Event, error)
}

// maxUploadBody bounds a whole upload request: one file at the limit and
// room for the multipart framing.
const maxUploadBody = content.MaxAttachmentSize + 64<<10

// errNotMultipart is a body that is not multipart/form-data (415).
var errNotMultipart = errors.New("Content-Type must be multipart/form-data")

// HandleUploadAttachment is POST /api/v1/attachments?app=NAME: a multipart
// body whose part "file" is a PDF, PNG or JPEG of at most 20 MB, uploaded
// by one who may send through the app. It answers
// {"id","sha256","name","type","size"}.
func (s *Handlers) HandleUploadAttachment(w http.ResponseWriter, r *http.Request) {
	if s.Attachments == nil {
		writeError(w, http.StatusNotFound, "not found")
		return
	}
	// The upload store decides (an admin, or a sender of the app; an
	// unknown app is refused) before the body is read, and returns the
	// rows the upload is due, a refusal's too.
	app := s.apps[r.URL.Query().Get("app")]
	open := func() (string, io.Reader, error) {
		mt, params, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
		if err != nil || mt != "multipart/form-data" || params["boundary"] == "" {
			return "", nil, errNotMultipart
		}
		r.Body = http.MaxBytesReader(w, r.Body, maxUploadBody)
		part, err := filePart(r)
		if err != nil {
			return "", nil, err
		}
		return part.FileName(), part, nil
	}
	a, rows, err := s.Attachments.Upload(r.Context(), principalFrom(r.Context()), access.Target{Corp: app.CorpID, App: app.Name}, open)
	for _, e := range rows {
		_ = s.Record(r, e)
	}
	switch {
	case errors.Is(err, errNotMultipart):
		writeError(w, http.StatusUnsupportedMediaType, err.Error())
		return
	case err != nil:
		s.Fail(w, r, uploadError(err))
		return
	}
	writeJSON(w, http.StatusCreated, a)
}

// filePart returns the multipart part named "file", skipping others.
func filePart(r *http.Request) (interface {
	io.Reader
	FileName() string
}, error) {
	mr, err := r.MultipartReader()
	if err != nil {
		return nil, handle.BadParam("multipart body: %v", err)
	}
	for range 8 {
		part, err := mr.NextPart()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, uploadError(handle.BadParam("multipart body: %v", err))
		}
		if part.FormName() == "file" {
			return part, nil
		}
	}
	return nil, handle.BadParam(`the multipart body has no part named "file"`)
}

// uploadError maps the store's limit and a body past maxUploadBody to 413.
func uploadError(err error) error {
	var mbe *http.MaxBytesError
	if errors.Is(err, handle.ErrTooLarge) {
		return err // mapped already (filePart)
	}
	if errors.Is(err, attachment.ErrTooLarge) || errors.As(err, &mbe) {
		return fmt.Errorf("%w: %w", handle.ErrTooLarge, attachment.ErrTooLarge)
	}
	return err
}
