package dashboard

import (
	"net/http"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/dashboard/i18n"
)

// stateKeys are the catalogue keys of the list page's state badges
// (/work/shared/zh-CN.md: 草稿, 待发送, 发送中, 已发送, 已取消, 发送失败, 待处理).
var stateKeys = map[string]string{
	string(yidu.StateDraft):     "notice_state.draft",
	string(yidu.StateScheduled): "notice_state.scheduled",
	string(yidu.StateSending):   "notice_state.sending",
	string(yidu.StateSent):      "notice_state.sent",
	string(yidu.StateCancelled): "notice_state.cancelled",
	string(yidu.StateFailed):    "notice_state.failed",
	string(yidu.StateHeld):      "notice_state.held",
}

// lateKey is the badge's "sent late" suffix, with the minutes as %d.
const lateKey = "notice_state.late"

// stateBadge is a row's badge in the catalogue c: the state's word, then
// "延迟发送 (N 分钟)" for a notice that started sending late. A state
// this page does not know shows as itself.
// The templates call it as {{badge .State .SentLateBy}}.
func stateBadge(c i18n.Catalogue, state string, lateBy int64) string {
	w := state
	if k, ok := stateKeys[state]; ok {
		w = c.T(k)
	}
	if lateBy >= 60 && (state == string(yidu.StateSent) || state == string(yidu.StateSending)) {
		return w + " · " + c.TF(lateKey, lateBy/60)
	}
	return w
}

// pendingNotices is the list page's first-page section of notices not yet
// sent (drafts, scheduled, held, sending, failed), newest first; errors
// leave it empty (the list itself still shows).
func (s *Server) pendingNotices(r *http.Request, app string) []messageJSON {
	ns, err := s.acts.Pending(r.Context(), principalFrom(r.Context()), app)
	if err != nil {
		s.log.WarnContext(r.Context(), "list page: pending notices", "err", err)
	}
	var out []messageJSON
	for _, n := range ns {
		out = append(out, noticeJSON(n))
	}
	return out
}
