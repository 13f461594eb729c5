package dashboard

import (
	"context"
	"fmt"
	"net/http"

	"github.com/yidu-io/yidu"
)

// The compose page (/new) is a form the script static/compose.js drives
// through the API alone: the apps one may send from, the directory, the
// audience preview and POST/PATCH /api/v1/messages. The server renders
// only the frame and the card's limits, so the page and Validate count
// against the same numbers (the root package's, WeCom's doc path 90236).

// cardLimits are the card's limits as the compose page shows them.
type cardLimits struct {
	// Title and Body are characters (code points), URL bytes, as
	// yidu.Registration.Validate counts them.
	Title, Body, URL int
}

// composeLimits are the root package's limits of the card yidu sends.
var composeLimits = cardLimits{Title: yidu.MaxCardTitle, Body: yidu.MaxBody, URL: yidu.MaxURL}

// handleComposePage serves the compose page. ?from=<msgid> (duplicate) and
// ?edit=<msgid> (a draft or scheduled notice) are read by the script,
// which loads the notice through the API and its access checks.
func (s *Server) handleComposePage(w http.ResponseWriter, r *http.Request) {
	d := pageFor(r, "新建通知")
	d.Script = "compose.js"
	d.Limits = composeLimits
	s.render(w, http.StatusOK, "new.html", d)
}

// stateLabels are the page's words for a notice's states (zh-CN.md).
var stateLabels = map[string]string{
	string(yidu.StateDraft):     "草稿",
	string(yidu.StateScheduled): "待发送",
	string(yidu.StateSending):   "发送中",
	string(yidu.StateSent):      "已发送",
	string(yidu.StateCancelled): "已取消",
	string(yidu.StateFailed):    "发送失败",
	string(yidu.StateHeld):      "待确认",
}

// stateLabel is a state's word on the page; an unknown state is shown as
// the API names it.
func stateLabel(s string) string {
	if l, ok := stateLabels[s]; ok {
		return l
	}
	return s
}

// pendingStates are the notices the list page shows above the sent ones,
// to edit, send or cancel: held first, since a person must decide.
var pendingStates = []yidu.NoticeState{yidu.StateHeld, yidu.StateScheduled, yidu.StateDraft}

// pendingLimit bounds each state's rows on the list page; the API lists
// the rest (?state=).
const pendingLimit = 20

// pendingNotices lists p's held, scheduled and draft notices of app (""
// for all) for the list page; nil without campaigns.
func (s *Server) pendingNotices(ctx context.Context, p *principal, app string) ([]messageJSON, error) {
	if s.campaigns == nil || (p.corps != nil && len(p.corps) == 0) {
		return nil, nil
	}
	var out []messageJSON
	for _, st := range pendingStates {
		ns, _, err := s.campaigns.List(ctx, p.corps, st, app, "", pendingLimit)
		if err != nil {
			return nil, fmt.Errorf("list %s notices: %w", st, err)
		}
		for _, n := range ns {
			out = append(out, noticeJSON(n))
		}
	}
	return out, nil
}
