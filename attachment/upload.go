package attachment

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/access"
	"github.com/yidu-io/yidu/audit"
)

// File opens an upload's file: the name its uploader gave it and its
// bytes (the edge's multipart part). Upload opens it only once the
// caller may upload, so a refused caller's body is never read; an error
// opening it is the request's (no file part, not multipart) and is
// returned as it is.
type File func() (name string, r io.Reader, err error)

// Upload is an upload of an attachment through t's app by p (issue 47:
// the service decides and returns the rows). access.Decide says whether
// p may (an admin of the corp or a sender of the app; fail-closed: no
// caller, no corp or app is refused, an error wrapping access.ErrRefused
// with its reason); then the file is opened and kept (Put, created by
// p's actor). The rows it is due: the refusal's; "<id> <type> <n> bytes"
// for an attachment kept; failed when it could not be kept. An upload
// that is not acceptable (too large, not a PDF, PNG or JPEG, a bad
// name, cut short) or a file that cannot be opened is invalid input and
// is due none: hostile input writes nothing.
func (s *Store) Upload(ctx context.Context, p *access.Principal, t access.Target, open File) (Attachment, []audit.Event, error) {
	d := access.Decide(p, yidu.ActionUpload, t)
	if !d.Allowed {
		return Attachment{}, []audit.Event{d.Event}, d.Err()
	}
	name, r, err := open()
	if err != nil {
		return Attachment{}, nil, err
	}
	e := d.Event
	a, err := s.Put(ctx, t.Corp, e.Actor, name, r)
	if errors.Is(err, yidu.ErrInvalid) || errors.Is(err, ErrTooLarge) {
		return Attachment{}, nil, err
	}
	if err != nil {
		e.Outcome = "failed"
		return Attachment{}, []audit.Event{e}, err
	}
	e.Detail = fmt.Sprintf("%s %s %d bytes", a.ID, a.Type, a.Size)
	return a, []audit.Event{e}, nil
}
