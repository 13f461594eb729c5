package dashboard

import (
	"bytes"
	"errors"
	"html/template"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/yidu-io/yidu"
)

// The page is server-rendered html/template (every value escaped by
// context) plus one script file, static/app.js, which fills in live data
// with textContent only. The CSP forbids inline scripts and styles.

var templateFuncs = template.FuncMap{
	"time": func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04 UTC") },
	"deref": func(p any) any {
		switch v := p.(type) {
		case *int64:
			if v != nil {
				return *v
			}
		case *float64:
			if v != nil {
				return *v
			}
		case *time.Time:
			if v != nil {
				return *v
			}
		}
		return nil
	},
}

type pageData struct {
	Title string
	User  string
	CSRF  string
	Error string
	// Rows are the list page's messages; Query, App and Apps its search.
	Rows  []listRow
	Query string
	App   string
	Apps  []string
	Next  string
	Msg   messageJSON
	// Pending are the notices not sent yet (first page only).
	Pending []messageJSON
	// Signals is the message page's by_signal breakdown.
	Signals []signalView
	// Status is SetStatus's line, if any.
	Status string
}

// signalView is one signal's line on the message page.
type signalView struct {
	// ID is the element app.js updates: "signal-" + the API name with '-'.
	ID    string
	Label string
	Count int64
	// Counted: the signal counts as read for the message's app.
	Counted bool
}

// signalLabels are the page's names of the signals.
var signalLabels = map[yidu.Signal]string{
	yidu.SignalButton:     "Button 按钮",
	yidu.SignalLink:       "Link 链接",
	yidu.SignalEnterAgent: "Opened app 进入应用",
}

// signalViews lists m's signals in the API's order; app decides which
// count as read (an app no longer configured: the defaults).
func signalViews(app yidu.App, by yidu.SignalCounts) []signalView {
	out := make([]signalView, 0, yidu.NumSignals)
	for _, sig := range yidu.Signals() {
		out = append(out, signalView{ID: "signal-" + strings.ReplaceAll(sig.String(), "_", "-"),
			Label: signalLabels[sig], Count: by.Get(sig), Counted: app.CountsAsRead(sig)})
	}
	return out
}

func (s *Server) render(w http.ResponseWriter, code int, name string, d pageData) {
	d.Status = s.status.text()
	var buf bytes.Buffer
	if err := s.pages.ExecuteTemplate(&buf, name, d); err != nil {
		s.log.Error("render page", "page", name, "err", err)
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_, _ = w.Write(buf.Bytes())
}

func (s *Server) renderLogin(w http.ResponseWriter, code int, msg string) {
	s.render(w, code, "login.html", pageData{Title: "Sign in / 登录", Error: msg})
}

func (s *Server) handleLoginPage(w http.ResponseWriter, r *http.Request) {
	if _, _, ok, _ := s.sessionFrom(r); ok {
		http.Redirect(w, r, "/", http.StatusSeeOther)
		return
	}
	s.renderLogin(w, http.StatusOK, "")
}

func pageFor(r *http.Request, title string) pageData {
	p := principalFrom(r.Context())
	d := pageData{Title: title, User: p.name}
	if p.session != nil {
		d.CSRF = p.session.csrf
	}
	return d
}

// listRow is one message of the list page and what sending it did.
type listRow struct {
	messageJSON
	// Batches counts the message's send batches by outcome; nil when
	// yidu did not send it (or the report is unavailable).
	Batches *batchCounts
}

// batchCounts is the list's one-line send outcome, in batches.
type batchCounts struct {
	Result                         string
	Sent, Refused, Unknown, Unsent int
}

// countBatches counts the notice's own batches (reminders left out);
// Result is as the message's send report says it: sent, partial or failed.
func countBatches(outcomes []yidu.BatchOutcome) *batchCounts {
	c := &batchCounts{}
	n := 0
	for _, o := range outcomes {
		if o.Reminder {
			continue
		}
		switch o.Status {
		case yidu.SendSent:
			c.Sent++
		case yidu.SendRefused:
			c.Refused++
		case yidu.SendUnknown:
			c.Unknown++
		case yidu.SendUnsent:
			c.Unsent++
		}
		n++
	}
	switch {
	case n == 0:
		return nil
	case c.Sent == n:
		c.Result = "sent"
	case c.Sent == 0:
		c.Result = "failed"
	default:
		c.Result = "partial"
	}
	return c
}

// appsFor lists the names of the apps p may see, sorted.
func (s *Server) appsFor(p *principal) []string {
	var out []string
	for name, a := range s.apps {
		if p.allows(a.CorpID) {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

func (s *Server) handleListPage(w http.ResponseWriter, r *http.Request) {
	d := pageFor(r, "Messages / 消息")
	p := principalFrom(r.Context())
	d.Apps = s.appsFor(p)
	cursor, err := parseListCursor(r.URL.Query().Get("cursor"))
	if err != nil {
		d.Error = "Bad cursor"
		s.render(w, http.StatusBadRequest, "list.html", d)
		return
	}
	f, err := parseListFilter(r.URL.Query())
	if err != nil {
		d.Error = "Bad search / 搜索无效"
		s.render(w, http.StatusBadRequest, "list.html", d)
		return
	}
	d.Query, d.App = f.title, f.app
	list, err := s.listMessages(r.Context(), p, f, cursor, yidu.DefaultListLimit)
	if err != nil {
		code, _ := httpStatus(err)
		if code < 500 {
			s.log.DebugContext(r.Context(), "list page refused", "err", err)
			d.Error = "Bad cursor"
			s.render(w, code, "list.html", d)
			return
		}
		s.log.ErrorContext(r.Context(), "list page", "err", err)
		d.Error = "The message list is unavailable, try again shortly."
		s.render(w, http.StatusServiceUnavailable, "list.html", d)
		return
	}
	if cursor == "" {
		d.Pending = s.pendingNotices(r, f.app)
	}
	for _, m := range list.Messages {
		row := listRow{messageJSON: m}
		// The send outcome is a part of the row, not a condition of it.
		if outcomes, err := s.msgs.SendOutcomes(r.Context(), m.CorpID, m.MsgID); err != nil {
			s.log.WarnContext(r.Context(), "list page: send outcomes", "msgid", m.MsgID, "err", err)
		} else {
			row.Batches = countBatches(outcomes)
		}
		d.Rows = append(d.Rows, row)
	}
	if list.NextCursor != "" {
		q := url.Values{"cursor": {list.NextCursor}}
		if f.title != "" {
			q.Set("q", f.title)
		}
		if f.app != "" {
			q.Set("app", f.app)
		}
		d.Next = "/?" + q.Encode()
	}
	s.render(w, http.StatusOK, "list.html", d)
}

func (s *Server) handleMessagePage(w http.ResponseWriter, r *http.Request) {
	d := pageFor(r, "Message / 消息")
	m, r, err := s.gate(r)
	if err == nil {
		var c counts
		if c, err = s.scopedCounts(r.Context(), m); err == nil {
			d.Msg = toJSON(m)
			d.Msg.setCounts(c)
			d.Signals = signalViews(s.apps[m.App], c.bySignal)
			d.Title = m.Title
			// The send report is a part of the page, not a condition of it.
			if outcomes, err := s.msgs.SendOutcomes(r.Context(), m.CorpID, m.MsgID); err != nil {
				s.log.ErrorContext(r.Context(), "message page: send outcomes", "err", err)
			} else {
				d.Msg.Send = toSendJSON(m.MsgID, outcomes)
			}
			s.render(w, http.StatusOK, "message.html", d)
			return
		}
	}
	code, _ := httpStatus(err)
	if errors.Is(err, errBadParam) {
		code = http.StatusNotFound
	}
	if code >= 500 {
		s.log.ErrorContext(r.Context(), "message page", "err", err)
	}
	d.Error = "Message not found / 未找到消息"
	if code != http.StatusNotFound {
		d.Error = "The message is unavailable, try again shortly."
	}
	s.render(w, code, "message.html", d)
}
