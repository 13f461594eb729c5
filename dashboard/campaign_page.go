package dashboard

import (
	"fmt"
	"net/http"

	"github.com/yidu-io/yidu"
)

// stateWords are the list page's state badges (/work/shared/zh-CN.md).
var stateWords = map[string]string{
	string(yidu.StateDraft):     "草稿",
	string(yidu.StateScheduled): "待发送",
	string(yidu.StateSending):   "发送中",
	string(yidu.StateSent):      "已发送",
	string(yidu.StateCancelled): "已取消",
	string(yidu.StateFailed):    "发送失败",
	string(yidu.StateHeld):      "待处理",
}

// stateBadge is a row's badge text: the state's word, "延迟发送 (N 分钟)"
// for a notice that started sending late.
func stateBadge(j messageJSON) string {
	if j.SentLateBy >= 60 && (j.State == string(yidu.StateSent) || j.State == string(yidu.StateSending)) {
		return fmt.Sprintf("%s · 延迟发送 (%d 分钟)", stateWords[j.State], j.SentLateBy/60)
	}
	if w, ok := stateWords[j.State]; ok {
		return w
	}
	return j.State
}

// Badge is stateBadge(j), for the templates.
func (j messageJSON) Badge() string { return stateBadge(j) }

// pendingNotices is the list page's first-page section of notices not yet
// sent (drafts, scheduled, held, sending, failed), newest first; errors
// leave it empty (the list itself still shows).
func (s *Server) pendingNotices(r *http.Request, app string) []messageJSON {
	if s.campaigns == nil {
		return nil
	}
	p := principalFrom(r.Context())
	if p == nil || (p.corps != nil && len(p.corps) == 0) {
		return nil
	}
	var out []messageJSON
	for _, st := range []yidu.NoticeState{yidu.StateHeld, yidu.StateFailed, yidu.StateSending, yidu.StateScheduled, yidu.StateDraft} {
		ns, _, err := s.campaigns.List(r.Context(), p.corps, st, app, "", yidu.DefaultListLimit)
		if err != nil {
			s.log.WarnContext(r.Context(), "list page: pending notices", "err", err)
			return out
		}
		for _, n := range ns {
			if p.allows(n.App.CorpID) {
				out = append(out, noticeJSON(n))
			}
		}
	}
	return out
}
