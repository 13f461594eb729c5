package campaign

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/access"
	"github.com/yidu-io/yidu/attachment"
	"github.com/yidu-io/yidu/content"
)

// Templates keeps notice templates (issue 41, 从模板新建; migration
// 00028): a sender of the app lists and uses them, an admin of its corp
// creates, changes and deletes them. A notice made from one is composed
// like any other (the sender's audience, approval and all).
type Templates struct {
	db    *sql.DB
	apps  map[string]yidu.App
	now   func() time.Time
	files Files
}

// Files resolves uploads by id within a corp (attachment.Store.Get; an
// id not the corp's is attachment.ErrNotFound).
type Files interface {
	Get(ctx context.Context, corp string, ids []string) ([]attachment.Attachment, error)
}

// WithFiles makes t check that a template's attachments are uploads of
// its corp when it is saved, and answer them (Files) when a notice is
// made from it. It returns t.
func (t *Templates) WithFiles(f Files) *Templates {
	t.files = f
	return t
}

// Files returns tpl's attachments (name, type, size, hash) in order, so
// a notice made from it carries them again (从模板新建, issue 41); none
// without Files. An upload gone since is attachment.ErrNotFound.
func (t *Templates) Files(ctx context.Context, tpl yidu.Template) ([]attachment.Attachment, error) {
	if t.files == nil || len(tpl.Attachments) == 0 {
		return []attachment.Attachment{}, nil
	}
	out, err := t.files.Get(ctx, tpl.App.CorpID, tpl.Attachments)
	if err != nil {
		return nil, fmt.Errorf("campaign: template %d: %w", tpl.ID, err)
	}
	return out, nil
}

// checkFiles refuses attachments that are not uploads of tpl's corp
// (field attachments), or more than a notice may carry.
func (t *Templates) checkFiles(ctx context.Context, tpl yidu.Template) error {
	if len(tpl.Attachments) > content.MaxAttachments {
		return yidu.Invalidf("attachments: more than %d", content.MaxAttachments)
	}
	if t.files == nil || len(tpl.Attachments) == 0 {
		return nil
	}
	_, err := t.files.Get(ctx, tpl.App.CorpID, tpl.Attachments)
	if errors.Is(err, attachment.ErrNotFound) {
		return yidu.Invalidf("attachments: %v", err)
	}
	if err != nil {
		return fmt.Errorf("campaign: template attachments: %w", err)
	}
	return nil
}

// NewTemplates returns the templates over db for apps; nil now is
// time.Now.
func NewTemplates(db *sql.DB, apps []yidu.App, now func() time.Time) *Templates {
	if now == nil {
		now = time.Now
	}
	m := make(map[string]yidu.App, len(apps))
	for _, a := range apps {
		m[a.Name] = a
	}
	return &Templates{db: db, apps: m, now: now}
}

// templateFields is a template's JSON in notice_templates.fields.
type templateFields struct {
	Title          string        `json:"title"`
	Body           string        `json:"body"`
	URL            string        `json:"url"`
	Audience       yidu.Audience `json:"audience"`
	FollowUp       *yidu.Policy  `json:"follow_up,omitempty"`
	Markdown       string        `json:"markdown,omitempty"`
	Attachments    []string      `json:"attachments,omitempty"`
	ReadRule       yidu.ReadRule `json:"read_rule,omitempty"`
	MinReadSeconds int           `json:"min_read_seconds,omitempty"`
}

// mayChange refuses anyone but an admin of app's corp.
func mayChange(p *access.Principal, app yidu.App) error {
	if p == nil || !p.Admin(app.CorpID) {
		return fmt.Errorf("%w: only an admin may change the app's templates", ErrForbidden)
	}
	return nil
}

// List returns app's templates, newest change first, for a caller who
// may send through app (ErrForbidden otherwise).
func (t *Templates) List(ctx context.Context, p *access.Principal, app yidu.App) ([]yidu.Template, error) {
	if err := mustSend(p, app.CorpID, app.Name, "use the templates of"); err != nil {
		return nil, err
	}
	rows, err := t.db.QueryContext(ctx, `SELECT id, app, name, fields, created_by, updated_by, created_at, updated_at
		FROM notice_templates WHERE corp_id = ? AND app = ? AND deleted_at IS NULL ORDER BY updated_at DESC, id DESC LIMIT 500`,
		app.CorpID, app.Name)
	if err != nil {
		return nil, fmt.Errorf("campaign: list templates: %w", err)
	}
	defer rows.Close()
	out := []yidu.Template{}
	for rows.Next() {
		tpl, err := t.scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, tpl)
	}
	return out, rows.Err()
}

func (t *Templates) scan(sc interface{ Scan(...any) error }) (yidu.Template, error) {
	var tpl yidu.Template
	var app, fields string
	if err := sc.Scan(&tpl.ID, &app, &tpl.Name, &fields, &tpl.CreatedBy, &tpl.UpdatedBy, &tpl.CreatedAt, &tpl.UpdatedAt); err != nil {
		return tpl, err
	}
	tpl.App = t.apps[app]
	var f templateFields
	if err := json.Unmarshal([]byte(fields), &f); err != nil {
		return tpl, fmt.Errorf("campaign: template %d: %w", tpl.ID, err)
	}
	tpl.Title, tpl.Body, tpl.URL, tpl.Audience, tpl.FollowUp = f.Title, f.Body, f.URL, f.Audience, f.FollowUp
	tpl.Markdown, tpl.Attachments, tpl.ReadRule, tpl.MinReadSeconds = f.Markdown, f.Attachments, f.ReadRule, f.MinReadSeconds
	return tpl, nil
}

// Get returns template id for a caller who may send through its app; to
// anyone else it is ErrNotFound, like one of another corp.
func (t *Templates) Get(ctx context.Context, p *access.Principal, id int64) (yidu.Template, error) {
	tpl, err := t.scan(t.db.QueryRowContext(ctx, `SELECT id, app, name, fields, created_by, updated_by, created_at, updated_at
		FROM notice_templates WHERE id = ? AND deleted_at IS NULL`, id))
	if errors.Is(err, sql.ErrNoRows) || (err == nil && (tpl.App.Name == "" || p == nil || !p.MaySend(tpl.App.CorpID, tpl.App.Name))) {
		return yidu.Template{}, fmt.Errorf("%w: template %d", yidu.ErrNotFound, id)
	}
	if err != nil {
		return yidu.Template{}, fmt.Errorf("campaign: template %d: %w", id, err)
	}
	return tpl, nil
}

func fieldsOf(tpl yidu.Template) (string, error) {
	b, err := json.Marshal(templateFields{Title: tpl.Title, Body: tpl.Body, URL: tpl.URL, Audience: tpl.Audience, FollowUp: tpl.FollowUp,
		Markdown: tpl.Markdown, Attachments: tpl.Attachments, ReadRule: tpl.ReadRule, MinReadSeconds: tpl.MinReadSeconds})
	return string(b), err
}

// Create stores tpl (an admin of its app's corp only).
func (t *Templates) Create(ctx context.Context, p *access.Principal, tpl yidu.Template) (yidu.Template, error) {
	if err := mayChange(p, tpl.App); err != nil {
		return yidu.Template{}, err
	}
	if err := tpl.Validate(); err != nil {
		return yidu.Template{}, err
	}
	if err := t.checkFiles(ctx, tpl); err != nil {
		return yidu.Template{}, err
	}
	fields, err := fieldsOf(tpl)
	if err != nil {
		return yidu.Template{}, fmt.Errorf("campaign: template: %w", err)
	}
	now := t.now().UTC().Truncate(time.Millisecond)
	res, err := execRetry(ctx, t.db, `INSERT INTO notice_templates (corp_id, app, name, fields, created_by, updated_by, created_at, updated_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?)`, tpl.App.CorpID, tpl.App.Name, tpl.Name, fields, p.Name, p.Name, now, now)
	if err != nil {
		return yidu.Template{}, fmt.Errorf("campaign: create template: %w", err)
	}
	id, err := res.LastInsertId()
	if err != nil {
		return yidu.Template{}, fmt.Errorf("campaign: create template: %w", err)
	}
	return t.Get(ctx, p, id)
}

// Update replaces template id's fields and name (an admin only); its app
// stays.
func (t *Templates) Update(ctx context.Context, p *access.Principal, id int64, tpl yidu.Template) (yidu.Template, error) {
	cur, err := t.Get(ctx, p, id)
	if err != nil {
		return yidu.Template{}, err
	}
	if err := mayChange(p, cur.App); err != nil {
		return yidu.Template{}, err
	}
	tpl.App = cur.App
	if err := tpl.Validate(); err != nil {
		return yidu.Template{}, err
	}
	if err := t.checkFiles(ctx, tpl); err != nil {
		return yidu.Template{}, err
	}
	fields, err := fieldsOf(tpl)
	if err != nil {
		return yidu.Template{}, fmt.Errorf("campaign: template: %w", err)
	}
	now := t.now().UTC().Truncate(time.Millisecond)
	if _, err := execRetry(ctx, t.db, `UPDATE notice_templates SET name = ?, fields = ?, version = version + 1, updated_by = ?, updated_at = ?
		WHERE id = ? AND deleted_at IS NULL`, tpl.Name, fields, p.Name, now, id); err != nil {
		return yidu.Template{}, fmt.Errorf("campaign: update template %d: %w", id, err)
	}
	return t.Get(ctx, p, id)
}

// Delete removes template id from the list (an admin only).
func (t *Templates) Delete(ctx context.Context, p *access.Principal, id int64) error {
	cur, err := t.Get(ctx, p, id)
	if err != nil {
		return err
	}
	if err := mayChange(p, cur.App); err != nil {
		return err
	}
	now := t.now().UTC().Truncate(time.Millisecond)
	if _, err := execRetry(ctx, t.db, `UPDATE notice_templates SET deleted_at = ?, updated_by = ?, updated_at = ? WHERE id = ? AND deleted_at IS NULL`,
		now, p.Name, now, id); err != nil {
		return fmt.Errorf("campaign: delete template %d: %w", id, err)
	}
	return nil
}

// ErrNoTemplates: the service keeps no templates (ServiceOptions.Templates).
var ErrNoTemplates = errors.New("templates are not configured")

// ListTemplates is app's templates for p (Templates.List); none when the
// service keeps no templates.
func (s *Service) ListTemplates(ctx context.Context, p *access.Principal, app yidu.App) ([]yidu.Template, error) {
	if s.o.Templates == nil {
		return nil, nil
	}
	return s.o.Templates.List(ctx, p, app)
}

// CreateTemplate saves tpl for p (Templates.Create: an admin of its corp).
func (s *Service) CreateTemplate(ctx context.Context, p *access.Principal, tpl yidu.Template) (yidu.Template, error) {
	if s.o.Templates == nil {
		return yidu.Template{}, ErrNoTemplates
	}
	return s.o.Templates.Create(ctx, p, tpl)
}

// Template is template id as p may see it, with its attachments' names
// and sizes, so a notice made from it carries them again.
func (s *Service) Template(ctx context.Context, p *access.Principal, id int64) (yidu.Template, []attachment.Attachment, error) {
	if s.o.Templates == nil {
		return yidu.Template{}, nil, ErrNoTemplates
	}
	tpl, err := s.o.Templates.Get(ctx, p, id)
	return s.withFiles(ctx, tpl, err)
}

// UpdateTemplate replaces template id for p, answered as Template.
func (s *Service) UpdateTemplate(ctx context.Context, p *access.Principal, id int64, tpl yidu.Template) (yidu.Template, []attachment.Attachment, error) {
	if s.o.Templates == nil {
		return yidu.Template{}, nil, ErrNoTemplates
	}
	tpl, err := s.o.Templates.Update(ctx, p, id, tpl)
	return s.withFiles(ctx, tpl, err)
}

// DeleteTemplate deletes template id for p.
func (s *Service) DeleteTemplate(ctx context.Context, p *access.Principal, id int64) error {
	if s.o.Templates == nil {
		return ErrNoTemplates
	}
	return s.o.Templates.Delete(ctx, p, id)
}

func (s *Service) withFiles(ctx context.Context, tpl yidu.Template, err error) (yidu.Template, []attachment.Attachment, error) {
	if err != nil {
		return tpl, nil, err
	}
	files, err := s.o.Templates.Files(ctx, tpl)
	return tpl, files, err
}
