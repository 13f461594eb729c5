package yidu

import (
	"fmt"
	"time"
	"unicode/utf8"
)

// MaxTemplateName bounds a template's name (characters).
const MaxTemplateName = 64

// Template is a notice kept to start others from (issue 41, 从模板新建):
// its content, attachments, audience, follow-up policy and read rule.
// A sender of the app uses it; the app's admins change it.
type Template struct {
	ID   int64
	App  App
	Name string
	// Title, Body, URL and Audience are a notice's (Draft's).
	Title, Body, URL string
	Audience         Audience
	// FollowUp is the policy a notice from it starts with; nil: none.
	FollowUp *Policy
	// Markdown, Attachments (upload ids, in order), ReadRule and
	// MinReadSeconds are the content's (issue 39).
	Markdown       string
	Attachments    []string
	ReadRule       ReadRule
	MinReadSeconds int
	CreatedBy      string
	UpdatedBy      string
	CreatedAt      time.Time
	UpdatedAt      time.Time
}

// Validate checks what a template must have: a name, a title within the
// card's, a known read rule. Its audience may be empty (picked when a
// notice is made from it). Errors wrap ErrInvalid and start with the
// field.
func (t Template) Validate() error {
	if t.Name == "" || utf8.RuneCountInString(t.Name) > MaxTemplateName || !utf8.ValidString(t.Name) {
		return Invalidf("name: 1..%d characters of UTF-8", MaxTemplateName)
	}
	if utf8.RuneCountInString(t.Title) > MaxCardTitle {
		return Fieldf("title", "title: longer than %d characters", MaxCardTitle)
	}
	if t.ReadRule != "" {
		if _, err := ParseReadRule(string(t.ReadRule)); err != nil {
			return fmt.Errorf("read_rule: %w", err)
		}
	}
	if t.MinReadSeconds < 0 {
		return Fieldf("min_read_seconds", "min_read_seconds: negative")
	}
	return nil
}
