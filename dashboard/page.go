package dashboard

import (
	"bytes"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/access"
	"github.com/yidu-io/yidu/dashboard/i18n"
	"github.com/yidu-io/yidu/progress"
)

// The page is server-rendered html/template (every value escaped by
// context) plus one script file, static/app.js, which fills in live data
// with textContent only. The CSP forbids inline scripts and styles.

var templateFuncs = template.FuncMap{
	"time": func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04 UTC") },
	"num":  func(n any) string { return yidu.GroupDigits(fmt.Sprint(n)) },
	// sanitized is a notice's text as content.Render left it: goldmark's
	// HTML through bluemonday's allow-list (no script, no event handler,
	// no remote image), so it is shown as HTML.
	"sanitized": func(s string) template.HTML { return template.HTML(s) }, //nolint:gosec // sanitized by content.Render
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
	// Title is a literal title (a notice's); TitleKey the catalogue key of
	// the page's title otherwise.
	Title    string
	TitleKey string
	// Lang is the page's language (i18n.LangFor); Here the path the language
	// switch returns to.
	Lang string
	Here string
	User string
	CSRF string
	// Error is a catalogue key.
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
	// MaySend shows what sends (新建通知, 撤回, 复制) and MayRemind 提醒未读
	// to those who may; the API refuses the others anyway (issue 31: a
	// department leader reads and reminds, and sends nothing).
	MaySend   bool
	MayRemind bool
	// Scoped: the caller sees part of the notice's recipients (a viewer),
	// so the page names its exports "my people", not the whole notice.
	Scoped bool
	// HasContent: the notice has full text (issue 39); the page shows its
	// versions.
	HasContent bool
	// PageStates: the notice is read under read_rule acknowledged, so the
	// people filter offers the reading page's four states.
	PageStates bool
	// WeComLogin is the sign-in page's link to sign in with WeCom ("":
	// not configured).
	WeComLogin string
	// Status is SetStatus's line, if any.
	Status string
	// Approval is the approval page's (issue 41).
	Approval *approvalJSON
	// Script is the page's own script in static/ besides app.js (the
	// compose page's compose.js), or empty.
	Script string
	// Limits are the card's limits the compose page counts against.
	Limits cardLimits
	// ReadButton is the card's button text as the tracker sends it
	// (yidu.ReadButtonText): card content the member sees, not page
	// chrome, so the preview shows it as sent in either page language.
	ReadButton string
	// Audit is the audit page's filter and events.
	Audit *auditView

	// Standing: the list filtered to standing notices (issue 51).
	Standing bool
}

// signalView is one signal's line on the message page.
type signalView struct {
	// ID is the element app.js updates: "signal-" + the API name with '-'.
	ID string
	// Label is a catalogue key.
	Label string
	Count int64
	// Counted: the signal counts as read for the message's app.
	Counted bool
}

// signalLabels are the page's names of the signals.
var signalLabels = map[yidu.Signal]string{
	yidu.SignalButton:     "signal.button",
	yidu.SignalLink:       "signal.link",
	yidu.SignalEnterAgent: "signal.enter_agent",
	// The reading page's (issue 39).
	yidu.SignalReadToEnd:    "signal.read_to_end",
	yidu.SignalAcknowledged: "signal.acknowledged",
}

// signalViews lists m's signals in the API's order; the message's read
// rule, else its app, decides which count as read (an app no longer
// configured: the defaults).
func signalViews(rule yidu.ReadRule, app yidu.App, by yidu.SignalCounts) []signalView {
	out := make([]signalView, 0, yidu.NumSignals)
	for _, sig := range yidu.Signals() {
		out = append(out, signalView{ID: "signal-" + strings.ReplaceAll(sig.String(), "_", "-"),
			Label: signalLabels[sig], Count: by.Get(sig), Counted: rule.CountsAsRead(app, sig)})
	}
	return out
}

// loadCatalogues reads the embedded catalogues (web/i18n).
func loadCatalogues() (map[string]i18n.Catalogue, error) {
	sub, err := fs.Sub(webFS, "web/i18n")
	if err != nil {
		return nil, err
	}
	return i18n.Load(sub)
}

// parsePages parses the templates once per language, each with its own t.
func parsePages(cats map[string]i18n.Catalogue) (map[string]*template.Template, error) {
	out := map[string]*template.Template{}
	for lang, c := range cats {
		funcs := template.FuncMap{"t": c.T, "tf": c.TF, "lang": func() string { return lang },
			"badge":  func(state string, lateBy int64) string { return stateBadge(c, state, lateBy) },
			"detail": func(d string) string { return i18n.AuditDetail(c, d) },
			// period is a standing rule's period ("7d", "1y") in words.
			"period": func(p string) string { return periodWords(c, p) },
			// tOr is t of prefix+word, or word itself when the catalogue
			// has no such key (a value recorded before its words existed).
			"tOr": func(prefix, word string) string {
				if c.Has(prefix + word) {
					return c.T(prefix + word)
				}
				return word
			}}
		p, err := template.New("").Funcs(templateFuncs).Funcs(funcs).ParseFS(webFS, "web/templates/*.html")
		if err != nil {
			return nil, fmt.Errorf("dashboard: templates: %w", err)
		}
		out[lang] = p
	}
	return out, nil
}

func (s *Server) render(w http.ResponseWriter, code int, name string, d pageData) {
	pages, ok := s.pages[d.Lang]
	if !ok {
		d.Lang = i18n.Languages[0]
		pages = s.pages[d.Lang]
	}
	d.Status = s.status.text(d.Lang)
	var buf bytes.Buffer
	if err := pages.ExecuteTemplate(&buf, name, d); err != nil {
		s.log.Error("render page", "page", name, "err", err)
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Content-Language", d.Lang)
	w.Header().Add("Vary", "Accept-Language, Cookie")
	w.WriteHeader(code)
	_, _ = w.Write(buf.Bytes())
}

func (s *Server) renderLogin(w http.ResponseWriter, r *http.Request, code int, msg string) {
	next := access.SafeNext(r.FormValue("next"))
	d := pageData{TitleKey: "login.title", Error: msg, Lang: i18n.LangFor(r), Here: "/login", Next: next}
	if s.wecomLogin != nil && s.publicURL != "" {
		d.WeComLogin = "/login/wecom?next=" + url.QueryEscape(next)
	}
	s.render(w, code, "login.html", d)
}

func (s *Server) handleLoginPage(w http.ResponseWriter, r *http.Request) {
	if _, _, ok, _ := s.sessionFrom(r); ok {
		http.Redirect(w, r, "/", http.StatusSeeOther)
		return
	}
	s.renderLogin(w, r, http.StatusOK, "")
}

// shownName is who the page says is signed in: a WeCom member by their
// directory name and UserID (王经理 (leader4)), never the session's
// internal key (wecom:<corp>:<UserID>); others by their name.
func shownName(p *access.Principal) string {
	if p.Kind != access.KindWeCom {
		return p.Name
	}
	if p.DisplayName == "" || p.DisplayName == p.UserID {
		return p.UserID
	}
	return p.DisplayName + " (" + p.UserID + ")"
}

// pageFor starts r's page; title is a catalogue key.
func pageFor(r *http.Request, title string) pageData {
	d := pageData{TitleKey: title, User: shownName(principalFrom(r.Context())), Lang: i18n.LangFor(r), Here: r.URL.RequestURI()}
	if sess := signInFrom(r.Context()); sess != nil {
		d.CSRF = sess.CSRF
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
	t := yidu.TallySends(outcomes, false)
	if t.Batches == 0 {
		return nil
	}
	return &batchCounts{Result: t.Result, Sent: t.SentBatches, Refused: t.RefusedBatches, Unknown: t.UnknownBatches, Unsent: t.UnsentBatches}
}

// maySendAny reports whether p may send through any app: who may not (a
// department leader) is offered no 新建通知.
func (s *Server) maySendAny(p *access.Principal) bool { return len(p.SendApps(s.appList)) > 0 }

func (s *Server) handleListPage(w http.ResponseWriter, r *http.Request) {
	d := pageFor(r, "list.title")
	p := principalFrom(r.Context())
	d.Apps = p.SeenApps(s.appList)
	d.MaySend = s.maySendAny(p)
	cursor, err := parseListCursor(r.URL.Query().Get("cursor"))
	if err != nil {
		d.Error = "error.bad_cursor"
		s.render(w, http.StatusBadRequest, "list.html", d)
		return
	}
	f, err := parseListFilter(r.URL.Query())
	if err != nil {
		d.Error = "error.bad_search"
		s.render(w, http.StatusBadRequest, "list.html", d)
		return
	}
	d.Query, d.App, d.Standing = f.title, f.app, f.standing
	list, err := s.listMessages(r.Context(), p, f, cursor, yidu.DefaultListLimit)
	if err != nil {
		code, _ := httpStatus(err)
		if code < 500 {
			s.log.DebugContext(r.Context(), "list page refused", "err", err)
			d.Error = "error.bad_cursor"
			s.render(w, code, "list.html", d)
			return
		}
		s.log.ErrorContext(r.Context(), "list page", "err", err)
		d.Error = "error.list_unavailable"
		s.render(w, http.StatusServiceUnavailable, "list.html", d)
		return
	}
	if cursor == "" {
		d.Pending = s.pendingNotices(r, f.app)
	}
	for _, m := range list.Messages {
		row := listRow{messageJSON: m}
		if !p.MaySend(m.CorpID, m.App) {
			// A viewer (a department leader) sees their people only; the
			// batches count the whole notice's.
			d.Rows = append(d.Rows, row)
			continue
		}
		// The send outcome is a part of the row, not a condition of it.
		if outcomes, err := s.prog.Outcomes(r.Context(), yidu.Message{CorpID: m.CorpID, MsgID: m.MsgID}); err != nil {
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
	d := pageFor(r, "message.title")
	m, r, err := s.gate(r)
	if err == nil {
		var c progress.Counts
		if c, err = s.prog.Counts(r.Context(), m, viewFrom(r.Context())); err == nil {
			d.Msg = toJSON(m)
			d.Msg.setCounts(c)
			d.Signals = signalViews(m.ReadRule, s.apps[m.App], c.BySignal)
			d.PageStates = m.ReadRule.Acknowledging()
			d.Title = m.Title
			p := principalFrom(r.Context())
			t := access.Target{Corp: m.CorpID, App: m.App, MsgID: m.MsgID}
			d.MaySend, d.MayRemind = access.Decide(p, yidu.ActionSend, t).Allowed, access.Decide(p, yidu.ActionRemind, t).Allowed
			d.Scoped = scoped(r.Context())
			// A part of the page, not a condition of it.
			has, cerr := s.acts.HasContent(r.Context(), m.CorpID, m.MsgID)
			if d.HasContent = has; cerr != nil {
				s.log.ErrorContext(r.Context(), "message page: content", "err", cerr)
			}
			d.Standing = s.isStanding(r.Context(), m) // issue 51: its section
			// The send report is a part of the page, not a condition of it.
			// It counts the whole notice's people: not for a scoped viewer.
			if !d.Scoped {
				if outcomes, err := s.prog.Outcomes(r.Context(), m); err != nil {
					s.log.ErrorContext(r.Context(), "message page: send outcomes", "err", err)
				} else {
					d.Msg.Send = toSendJSON(m.MsgID, outcomes)
				}
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
	d.Error = "error.message_not_found"
	if code != http.StatusNotFound {
		d.Error = "error.message_unavailable"
	}
	s.render(w, code, "message.html", d)
}

// periodWords is a standing rule's period ("7d", "6m", "1y": a number
// and h, d, w, m or y, yidu.Standing) in c's words; p itself when it is
// not one.
func periodWords(c i18n.Catalogue, p string) string {
	if len(p) < 2 || !c.Has("period."+p[len(p)-1:]) {
		return p
	}
	return c.TF("period."+p[len(p)-1:], p[:len(p)-1])
}
