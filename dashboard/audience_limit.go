package dashboard

import (
	"net/http"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/access"
	"github.com/yidu-io/yidu/campaign"
)

// Senders kept to their audience (issue 41): campaign decides what the
// caller may address through an app; the picker's endpoints list only
// that, and the preview and registration ask before anything else.

// checkAudience refuses an audience of app the caller may not address
// (campaign.AudienceError, 403 with the field).
func (s *Server) checkAudience(r *http.Request, p *access.Principal, app yidu.App, au yidu.Audience) error {
	return s.acts.CheckAudience(r.Context(), p, app, au)
}

// audiences is a's campaign.Audiences, nil without an Access (a nil
// *access.Access must not become a non-nil interface).
func audiences(a *access.Access) campaign.Audiences {
	if a == nil {
		return nil
	}
	return a
}
