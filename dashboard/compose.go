package dashboard

import (
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
	d := pageFor(r, "list.new_notice")
	if !s.maySendAny(principalFrom(r.Context())) {
		// A viewer (a department leader) sends nothing: say so rather
		// than show a form whose app list is empty.
		d.Error = "error.may_not_send"
		s.render(w, http.StatusForbidden, "message.html", d)
		return
	}
	d.Script = "compose.js"
	d.Limits = composeLimits
	d.ReadButton = yidu.ReadButtonText
	s.render(w, http.StatusOK, "new.html", d)
}
