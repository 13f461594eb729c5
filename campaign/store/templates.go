package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/internal/opt"
)

// Templates keeps notice templates (issue 41, 从模板新建; migration
// 00028) in notice_templates. Who may list, use and change them is the
// notice service's decision (campaign.Service's template methods).
type Templates struct {
	db   *sql.DB
	apps map[string]yidu.App
	now  func() time.Time
}

// NewTemplates returns the templates over db for apps; nil now is
// time.Now.
func NewTemplates(db *sql.DB, apps []yidu.App, now func() time.Time) *Templates {
	opt.Clock(&now)
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

// List returns app's templates, newest change first.
func (t *Templates) List(ctx context.Context, app yidu.App) ([]yidu.Template, error) {
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

// Get returns template id; yidu.ErrNotFound if there is none (deleted, or
// of an app not configured).
func (t *Templates) Get(ctx context.Context, id int64) (yidu.Template, error) {
	tpl, err := t.scan(t.db.QueryRowContext(ctx, `SELECT id, app, name, fields, created_by, updated_by, created_at, updated_at
		FROM notice_templates WHERE id = ? AND deleted_at IS NULL`, id))
	if errors.Is(err, sql.ErrNoRows) || (err == nil && tpl.App.Name == "") {
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

// Create stores tpl, by by, and returns its id.
func (t *Templates) Create(ctx context.Context, tpl yidu.Template, by string) (int64, error) {
	fields, err := fieldsOf(tpl)
	if err != nil {
		return 0, fmt.Errorf("campaign: template: %w", err)
	}
	now := t.now().UTC().Truncate(time.Millisecond)
	res, err := execRetry(ctx, t.db, `INSERT INTO notice_templates (corp_id, app, name, fields, created_by, updated_by, created_at, updated_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?)`, tpl.App.CorpID, tpl.App.Name, tpl.Name, fields, by, by, now, now)
	if err != nil {
		return 0, fmt.Errorf("campaign: create template: %w", err)
	}
	id, err := res.LastInsertId()
	if err != nil {
		return 0, fmt.Errorf("campaign: create template: %w", err)
	}
	return id, nil
}

// Update replaces template id's fields and name, by by; its app stays.
func (t *Templates) Update(ctx context.Context, id int64, tpl yidu.Template, by string) error {
	fields, err := fieldsOf(tpl)
	if err != nil {
		return fmt.Errorf("campaign: template: %w", err)
	}
	now := t.now().UTC().Truncate(time.Millisecond)
	if _, err := execRetry(ctx, t.db, `UPDATE notice_templates SET name = ?, fields = ?, version = version + 1, updated_by = ?, updated_at = ?
		WHERE id = ? AND deleted_at IS NULL`, tpl.Name, fields, by, now, id); err != nil {
		return fmt.Errorf("campaign: update template %d: %w", id, err)
	}
	return nil
}

// Delete removes template id from the list, by by.
func (t *Templates) Delete(ctx context.Context, id int64, by string) error {
	now := t.now().UTC().Truncate(time.Millisecond)
	if _, err := execRetry(ctx, t.db, `UPDATE notice_templates SET deleted_at = ?, updated_by = ?, updated_at = ? WHERE id = ? AND deleted_at IS NULL`,
		now, by, now, id); err != nil {
		return fmt.Errorf("campaign: delete template %d: %w", id, err)
	}
	return nil
}
