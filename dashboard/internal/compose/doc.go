// Package compose serves the API of the dashboard's compose page (写通知):
// the directory the caller may pick an audience from (departments, tags,
// people), what an audience comes to and whether it needs approval
// (audience/preview), a pasted list of UserIDs sorted out
// (audience/parse-list), the notice templates (从模板新建) and the
// upload of an attachment.
//
// campaign decides who may pick and what, and who may use and change a
// template; access.Decide whether the caller may compose through an app
// at all (a refused template change leaves its audit row). The handlers
// decode, ask, and encode.
package compose

import (
	"context"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/access"
	"github.com/yidu-io/yidu/attachment"
	"github.com/yidu-io/yidu/campaign"
	"github.com/yidu-io/yidu/dashboard/internal/handle"
	"github.com/yidu-io/yidu/internal/webedge"
)

// Acts is what the compose page asks of campaign (campaign.Service).
type Acts interface {
	Picking
	Templating
}

// Templating is notice templates (从模板新建, issue 41): campaign decides
// who may use and change them.
type Templating interface {
	ListTemplates(ctx context.Context, p *access.Principal, app yidu.App) ([]yidu.Template, error)
	// CreateTemplate, UpdateTemplate and DeleteTemplate return the
	// audit rows the change is due.
	CreateTemplate(ctx context.Context, p *access.Principal, t yidu.Template) (yidu.Template, []campaign.Act, error)
	Template(ctx context.Context, p *access.Principal, id int64) (yidu.Template, []attachment.Attachment, error)
	UpdateTemplate(ctx context.Context, p *access.Principal, id int64, t yidu.Template) (yidu.Template, []attachment.Attachment, []campaign.Act, error)
	DeleteTemplate(ctx context.Context, p *access.Principal, id int64) ([]campaign.Act, error)
}

// Picking is the compose page's audience: what the caller may pick,
// what an audience comes to, and a pasted list sorted out.
type Picking interface {
	Picker(ctx context.Context, p *access.Principal, app yidu.App) (campaign.Picker, error)
	Preview(ctx context.Context, p *access.Principal, app yidu.App, au yidu.Audience) (campaign.Preview, error)
	SortList(ctx context.Context, app yidu.App, ids []string) (known, missing []string, err error)
	// NeedsApprovalFor and Approvers tell the compose page whether a
	// notice needs approval and who gives it (需要审批：将由 张三 审批).
	NeedsApprovalFor(ctx context.Context, app yidu.App, au yidu.Audience, rr yidu.ReadRule) (bool, uint64, error)
	Approvers(ctx context.Context, app yidu.App, author string) ([]string, yidu.Role)
}

// Handlers serve the routes of this package; the dashboard builds them
// with New.
type Handlers struct {
	*handle.Base
	// Acts decides (the tests swap it, as the dashboard's).
	Acts Acts
	// apps are the apps by name: a request names its app.
	apps map[string]yidu.App
	// Attachments keeps uploads (nil: POST /attachments is 404).
	Attachments Attachments
}

// New builds the Handlers over base.
func New(base *handle.Base, acts Acts, apps map[string]yidu.App, atts Attachments) *Handlers {
	return &Handlers{Base: base, Acts: acts, apps: apps, Attachments: atts}
}

var (
	writeJSON     = webedge.WriteJSON
	writeError    = webedge.WriteError
	principalFrom = webedge.Caller
	errNotFound   = handle.ErrNotFound
)

type audienceJSON = handle.AudienceJSON
