package compose

import (
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/access"
	"github.com/yidu-io/yidu/attachment"
	"github.com/yidu-io/yidu/content"
	"github.com/yidu-io/yidu/dashboard/internal/handle"
)

// Attachments keeps the uploads of a notice's attachments
// (attachment.Store): the service checks the limits and sniffs the type,
// the handler only finds the file part.
type Attachments interface {
	Put(ctx context.Context, corp, by, name string, r io.Reader) (attachment.Attachment, error)
}

// maxUploadBody bounds a whole upload request: one file at the limit and
// room for the multipart framing.
const maxUploadBody = content.MaxAttachmentSize + 64<<10

// HandleUploadAttachment is POST /api/v1/attachments?app=NAME: a multipart
// body whose part "file" is a PDF, PNG or JPEG of at most 20 MB, uploaded
// by one who may send through the app. It answers
// {"id","sha256","name","type","size"}.
func (s *Handlers) HandleUploadAttachment(w http.ResponseWriter, r *http.Request) {
	if s.Attachments == nil {
		writeError(w, http.StatusNotFound, "not found")
		return
	}
	// access decides (an admin, or a sender of the app, who sees its
	// notices whole); a refusal, an unknown app's included, leaves its row.
	app := s.apps[r.URL.Query().Get("app")]
	d := handle.Decide(r, yidu.ActionUpload, access.Target{Corp: app.CorpID, App: app.Name})
	if s.Refused(w, r, d) {
		return
	}
	mt, params, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || mt != "multipart/form-data" || params["boundary"] == "" {
		writeError(w, http.StatusUnsupportedMediaType, "Content-Type must be multipart/form-data")
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxUploadBody)
	part, err := filePart(r)
	if err != nil {
		s.Fail(w, r, err)
		return
	}
	e := d.Event
	a, err := s.Attachments.Put(r.Context(), app.CorpID, e.Actor, part.FileName(), part)
	if err != nil {
		s.Fail(w, r, uploadError(err))
		return
	}
	e.Detail = fmt.Sprintf("%s %s %d bytes", a.ID, a.Type, a.Size)
	_ = s.Record(r, e)
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
	if errors.Is(err, attachment.ErrTooLarge) || errors.As(err, &mbe) {
		return fmt.Errorf("%w: %w", handle.ErrTooLarge, attachment.ErrTooLarge)
	}
	return err
}
