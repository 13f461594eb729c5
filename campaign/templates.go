package campaign

import (
	"context"
	"errors"
	"fmt"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/access"
	"github.com/yidu-io/yidu/attachment"
	"github.com/yidu-io/yidu/content"
)

// Notice templates (issue 41, 从模板新建; store.Templates keeps them): a
// sender of the app lists and uses them, an admin of its corp creates,
// changes and deletes them. A notice made from one is composed like any
// other (the sender's audience, approval and all).

// Files resolves uploads by id within a corp (attachment.Store.Get; an
// id not the corp's is attachment.ErrNotFound).
type Files interface {
	Get(ctx context.Context, corp string, ids []string) ([]attachment.Attachment, error)
}

// ErrNoTemplates: the service keeps no templates (Options.Templates).
var ErrNoTemplates = errors.New("templates are not configured")

// mayChange refuses anyone but an admin of app's corp.
func mayChange(p *access.Principal, app yidu.App) error {
	if !access.Decide(p, yidu.ActionTemplate, access.Target{Corp: app.CorpID, App: app.Name}).Allowed {
		return fmt.Errorf("%w: only an admin may change the app's templates", ErrForbidden)
	}
	return nil
}

// TemplateChange decides, before a template's body is taken, whether p
// may create (update false) or update a template of app, one of the
// server's apps: an admin of its corp only. A refusal is due its row,
// in the words the audit log has always had ("POST refused: …", "PUT
// refused: …"); one by a caller who does not send through app either
// says so, and the edge answers it as an unknown app (issue 46).
func TemplateChange(p *access.Principal, app yidu.App, update bool) ([]Act, error) {
	d := access.Decide(p, yidu.ActionTemplate, access.Target{Corp: app.CorpID, App: app.Name})
	if d.Allowed {
		return nil, nil
	}
	why, err := d.Reason, fmt.Errorf("%w: %s", ErrForbidden, d.Reason)
	if !access.Decide(p, yidu.ActionCompose, access.Target{Corp: app.CorpID, App: app.Name}).Allowed {
		why = "not a sender of the app"
	}
	change := "POST"
	if update {
		change = "PUT"
	}
	return []Act{{Action: yidu.ActionTemplate, Detail: change + " refused: " + why, Err: err}}, err
}

// templateFiles returns tpl's attachments (name, type, size, hash) in
// order, so a notice made from it carries them again (从模板新建, issue
// 41); none without Files. An upload gone since is attachment.ErrNotFound.
func (s *Service) templateFiles(ctx context.Context, tpl yidu.Template) ([]attachment.Attachment, error) {
	if s.o.Files == nil || len(tpl.Attachments) == 0 {
		return []attachment.Attachment{}, nil
	}
	out, err := s.o.Files.Get(ctx, tpl.App.CorpID, tpl.Attachments)
	if err != nil {
		return nil, fmt.Errorf("campaign: template %d: %w", tpl.ID, err)
	}
	return out, nil
}

// checkTemplate refuses a template that does not validate, or whose
// attachments are not uploads of its corp (field attachments), or more
// than a notice may carry.
func (s *Service) checkTemplate(ctx context.Context, tpl yidu.Template) error {
	if err := tpl.Validate(); err != nil {
		return err
	}
	if len(tpl.Attachments) > content.MaxAttachments {
		return yidu.Invalidf("attachments: more than %d", content.MaxAttachments)
	}
	if s.o.Files == nil || len(tpl.Attachments) == 0 {
		return nil
	}
	_, err := s.o.Files.Get(ctx, tpl.App.CorpID, tpl.Attachments)
	if errors.Is(err, attachment.ErrNotFound) {
		return yidu.Invalidf("attachments: %v", err)
	}
	if err != nil {
		return fmt.Errorf("campaign: template attachments: %w", err)
	}
	return nil
}

// ListTemplates is app's templates, newest change first, for a caller
// who may send through app (ErrForbidden otherwise); none when the
// service keeps no templates.
func (s *Service) ListTemplates(ctx context.Context, p *access.Principal, app yidu.App) ([]yidu.Template, error) {
	if s.o.Templates == nil {
		return nil, nil
	}
	if err := mustSend(p, app.CorpID, app.Name, "use the templates of"); err != nil {
		return nil, err
	}
	return s.o.Templates.List(ctx, app)
}

// getTemplate is template id for a caller who may send through its app;
// to anyone else it is yidu.ErrNotFound, like one of another corp.
func (s *Service) getTemplate(ctx context.Context, p *access.Principal, id int64) (yidu.Template, error) {
	tpl, err := s.o.Templates.Get(ctx, id)
	if err == nil && (p == nil || !p.MaySend(tpl.App.CorpID, tpl.App.Name)) {
		return yidu.Template{}, fmt.Errorf("%w: template %d", yidu.ErrNotFound, id)
	}
	return tpl, err
}

// CreateTemplate saves tpl for p (an admin of its app's corp only); each
// change of a template, refused or failed too, is due its row (issue 46).
func (s *Service) CreateTemplate(ctx context.Context, p *access.Principal, tpl yidu.Template) (got yidu.Template, acts []Act, err error) {
	defer func() {
		due(&acts, &err, Act{Action: yidu.ActionTemplate, Detail: fmt.Sprintf("create id=%d", got.ID)})
	}()
	if s.o.Templates == nil {
		return yidu.Template{}, nil, ErrNoTemplates
	}
	if err := mayChange(p, tpl.App); err != nil {
		return yidu.Template{}, nil, err
	}
	if err := s.checkTemplate(ctx, tpl); err != nil {
		return yidu.Template{}, nil, err
	}
	id, err := s.o.Templates.Create(ctx, tpl, p.Name)
	if err != nil {
		return yidu.Template{}, nil, err
	}
	got, err = s.getTemplate(ctx, p, id)
	return got, nil, err
}

// Template is template id as p may see it, with its attachments' names
// and sizes, so a notice made from it carries them again.
func (s *Service) Template(ctx context.Context, p *access.Principal, id int64) (yidu.Template, []attachment.Attachment, error) {
	if s.o.Templates == nil {
		return yidu.Template{}, nil, ErrNoTemplates
	}
	tpl, err := s.getTemplate(ctx, p, id)
	return s.withFiles(ctx, tpl, err)
}

// UpdateTemplate replaces template id's fields and name for p (an admin
// only; its app stays), answered as Template.
func (s *Service) UpdateTemplate(ctx context.Context, p *access.Principal, id int64, tpl yidu.Template) (_ yidu.Template, _ []attachment.Attachment, acts []Act, err error) {
	defer due(&acts, &err, Act{Action: yidu.ActionTemplate, Detail: fmt.Sprintf("update id=%d", id)})
	if s.o.Templates == nil {
		return yidu.Template{}, nil, nil, ErrNoTemplates
	}
	cur, err := s.getTemplate(ctx, p, id)
	if err != nil {
		return yidu.Template{}, nil, nil, err
	}
	if err := mayChange(p, cur.App); err != nil {
		return yidu.Template{}, nil, nil, err
	}
	tpl.App = cur.App
	if err := s.checkTemplate(ctx, tpl); err != nil {
		return yidu.Template{}, nil, nil, err
	}
	if err := s.o.Templates.Update(ctx, id, tpl, p.Name); err != nil {
		return yidu.Template{}, nil, nil, err
	}
	tpl, err = s.getTemplate(ctx, p, id)
	tpl, files, err := s.withFiles(ctx, tpl, err)
	return tpl, files, nil, err
}

// DeleteTemplate removes template id from the list for p (an admin only).
func (s *Service) DeleteTemplate(ctx context.Context, p *access.Principal, id int64) (acts []Act, err error) {
	defer due(&acts, &err, Act{Action: yidu.ActionTemplate, Detail: fmt.Sprintf("delete id=%d", id)})
	if s.o.Templates == nil {
		return nil, ErrNoTemplates
	}
	cur, err := s.getTemplate(ctx, p, id)
	if err != nil {
		return nil, err
	}
	if err := mayChange(p, cur.App); err != nil {
		return nil, err
	}
	return nil, s.o.Templates.Delete(ctx, id, p.Name)
}

func (s *Service) withFiles(ctx context.Context, tpl yidu.Template, err error) (yidu.Template, []attachment.Attachment, error) {
	if err != nil {
		return tpl, nil, err
	}
	files, err := s.templateFiles(ctx, tpl)
	return tpl, files, err
}
