package dashboard

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/access"
	"github.com/yidu-io/yidu/campaign"
	"github.com/yidu-io/yidu/campaign/loops"
	"github.com/yidu-io/yidu/progress"
)

// messageJSON is a message with its live counts (docs/api.md, "Message").
type messageJSON struct {
	MsgID      string    `json:"msgid"`
	CorpID     string    `json:"corp_id"`
	App        string    `json:"app"`
	AgentID    int64     `json:"agent_id"`
	Title      string    `json:"title"`
	Body       string    `json:"body"`
	URL        string    `json:"url"`
	SentAt     time.Time `json:"sent_at"`
	Recipients int64     `json:"recipients"`
	// Read, Unread, Percent and BySignal are null when Live is false: the
	// list does not rebuild expired keys, the detail endpoints do. A
	// recalled message's read and unread are the numbers frozen at its
	// recall.
	Read    *int64   `json:"read"`
	Unread  *int64   `json:"unread"`
	Percent *float64 `json:"percent"`
	// BySignal counts the recipients who gave each signal, whether or not
	// it counts as read for the app (Read is the union of those that do).
	BySignal *yidu.SignalCounts `json:"by_signal"`
	Live     bool               `json:"live"`
	// RecalledAt is null unless the message was recalled.
	RecalledAt *time.Time `json:"recalled_at"`
	// Send is what sending did: in the answer of a registration with
	// send, and of GET /messages/{msgid} once a batch was sent.
	Send *sendJSON `json:"send,omitempty"`
	// UnknownUserIDs, in the answer of a registration only: audience
	// UserIDs that name no active member, left out of the recipients.
	UnknownUserIDs []string `json:"unknown_userids,omitempty"`
	// FollowUp is the notice's follow-up policy and rounds (CONTRACT.md,
	// Follow-up); absent for a notice without one, and in list rows.
	FollowUp *loops.FollowUp `json:"follow_up,omitempty"`
	noticeFields
}

func toJSON(m yidu.Message) messageJSON {
	j := messageJSON{MsgID: m.MsgID, CorpID: m.CorpID, App: m.App, AgentID: m.AgentID,
		Title: m.Title, Body: m.Body, URL: m.URL, SentAt: m.SentAt.UTC(), Recipients: m.Recipients}
	j.State = string(yidu.StateSent)
	if m.Recalled() {
		at := m.RecalledAt.UTC()
		j.RecalledAt = &at
	}
	return j
}

// sendJSON is the send report (docs/api.md, "Send report"): every batch
// of the message and, in people, the totals by outcome.
type sendJSON struct {
	// Result is "sent" when every batch was sent, "failed" when none was,
	// "partial" otherwise.
	Result     string      `json:"result"`
	Sent       int         `json:"sent"`
	Invalid    int         `json:"invalid"`
	Refused    int         `json:"refused"`
	Unsent     int         `json:"unsent"`
	Unknown    int         `json:"unknown"`
	Missing    int         `json:"missing"`
	BadUserIDs int         `json:"bad_userids"`
	Batches    []batchJSON `json:"batches"`
}

// batchJSON is one send batch (task_id "<msgid>@<batch>").
type batchJSON struct {
	Batch      int        `json:"batch"`
	TaskID     string     `json:"task_id"`
	Status     string     `json:"status"`
	ErrCode    int64      `json:"errcode"`
	Users      int        `json:"users"`
	Invalid    int        `json:"invalid"`
	Missing    int        `json:"missing"`
	BadUserIDs int        `json:"bad_userids"`
	Resent     bool       `json:"resent"`
	Earlier    bool       `json:"earlier"`
	Recalled   bool       `json:"recalled"`
	At         *time.Time `json:"at"`
}

func toBatchJSON(msgID string, o yidu.BatchOutcome) batchJSON {
	b := batchJSON{Batch: o.Batch, TaskID: yidu.TaskID(yidu.MsgID(msgID), o.Batch), Status: string(o.Status), ErrCode: o.ErrCode,
		Users: o.Users, Invalid: o.Invalid, Missing: o.Missing, BadUserIDs: o.BadUserIDs,
		Resent: o.Resent, Earlier: o.Earlier, Recalled: o.Recalled}
	if o.Reminder {
		b.TaskID = "" // a reminder's task_id is not kept
	}
	if !o.At.IsZero() {
		at := o.At.UTC()
		b.At = &at
	}
	return b
}

// toSendJSON is the send report of outcomes (yidu.TallySends); nil for
// none.
func toSendJSON(msgID string, outcomes []yidu.BatchOutcome) *sendJSON {
	if len(outcomes) == 0 {
		return nil
	}
	t := yidu.TallySends(outcomes, true)
	j := &sendJSON{Result: t.Result, Sent: t.Sent, Invalid: t.Invalid, Refused: t.Refused, Unsent: t.Unsent, Unknown: t.Unknown,
		Missing: t.Missing, BadUserIDs: t.BadUserIDs, Batches: make([]batchJSON, 0, len(outcomes))}
	for _, o := range outcomes {
		j.Batches = append(j.Batches, toBatchJSON(msgID, o))
	}
	return j
}

func (j *messageJSON) setCounts(c progress.Counts) {
	read, unread, pct, by := c.Read, c.Recipients-c.Read, progress.Percent(c.Read, c.Recipients), c.BySignal
	j.Recipients, j.Read, j.Unread, j.Percent, j.BySignal, j.Live = c.Recipients, &read, &unread, &pct, &by, true
}

// withMessage serves a route under /messages/{msgid}: h runs only for a
// message the caller may see, with the caller's View in the request
// (gate); anything else is answered here.
func (s *Server) withMessage(h func(http.ResponseWriter, *http.Request, yidu.Message)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		m, r, err := s.gate(r)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		h(w, r, m)
	}
}

type listJSON struct {
	Messages   []messageJSON `json:"messages"`
	NextCursor string        `json:"next_cursor"`
}

func parseListLimit(s string) (int, error) {
	if s == "" {
		return yidu.DefaultListLimit, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > yidu.MaxListLimit {
		return 0, badParam("limit must be an integer in 1..%d", yidu.MaxListLimit)
	}
	return n, nil
}

// parseListCursor accepts the tracker's opaque cursor: printable ASCII.
func parseListCursor(s string) (string, error) {
	if len(s) > 512 {
		return "", badParam("cursor is not valid")
	}
	for i := 0; i < len(s); i++ {
		if s[i] < 0x21 || s[i] > 0x7e {
			return "", badParam("cursor is not valid")
		}
	}
	return s, nil
}

// listFilter narrows the list: a title search and an app.
type listFilter struct {
	title, app string
	// standing: standing notices only (issue 51).
	standing bool
}

// maxTitleSearch bounds ?q= of the list (a title is at most 512
// characters, migrations/00001).
const maxTitleSearch = 100

// parseListFilter reads ?q= (part of a title) and ?app= (an app's name).
func parseListFilter(q url.Values) (listFilter, error) {
	f := listFilter{title: strings.TrimSpace(q.Get("q")), app: q.Get("app")}
	switch q.Get("standing") {
	case "", "0", "false":
	case "1", "true":
		f.standing = true
	default:
		return f, badParam("standing must be true or false")
	}
	switch {
	case utf8.RuneCountInString(f.title) > maxTitleSearch || !utf8.ValidString(f.title) || strings.ContainsFunc(f.title, unicode.IsControl):
		return f, badParam("q must be at most %d printable characters", maxTitleSearch)
	case len(f.app) > 64 || strings.ContainsFunc(f.app, func(r rune) bool { return r <= ' ' || r > '~' }):
		return f, badParam("app is not an app name")
	}
	return f, nil
}

// listQuery is a list's ?limit=, ?cursor= (a notice list's is a msgid,
// the messages' the tracker's opaque one), ?q= and ?app=.
type listQuery struct {
	limit  int
	cursor string
	listFilter
}

func parseListQuery(q url.Values, notices bool) (l listQuery, err error) {
	if l.limit, err = parseListLimit(q.Get("limit")); err != nil {
		return l, err
	}
	if l.cursor, err = parseListCursor(q.Get("cursor")); err != nil {
		return l, err
	}
	if notices && l.cursor != "" && !yidu.MsgID(l.cursor).Valid() {
		return l, badParam("cursor is not a cursor of this list")
	}
	l.listFilter, err = parseListFilter(q)
	return l, err
}

// listMessages is one page of the caller's messages with live counts where
// the keys exist (no rebuild: a list must stay cheap).
func (s *Server) listMessages(ctx context.Context, p *access.Principal, f listFilter, cursor string, limit int) (listJSON, error) {
	if f.standing {
		return s.listStanding(ctx, p, f)
	}
	out := listJSON{Messages: []messageJSON{}}
	rows, next, err := s.prog.List(ctx, p, f.title, f.app, cursor, limit)
	if err != nil {
		return out, fmt.Errorf("dashboard: list messages: %w", err)
	}
	for _, rw := range rows {
		j := toJSON(rw.Message)
		if rw.Found {
			j.setCounts(rw.Counts)
		}
		// A notice campaign sent carries its send_at and lateness (one
		// primary-key read per row).
		if err := s.addNotice(ctx, p, &j); err != nil {
			return out, fmt.Errorf("dashboard: notice state: %w", err)
		}
		out.Messages = append(out.Messages, j)
	}
	out.NextCursor = next
	return out, nil
}

func (s *Server) handleListMessages(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	state, err := parseNoticeState(q.Get("state"))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if state != "" && state != yidu.StateSent {
		s.listNotices(w, r, state)
		return
	}
	l, err := parseListQuery(q, false)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	out, err := s.listMessages(r.Context(), principalFrom(r.Context()), l.listFilter, l.cursor, l.limit)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) handleGetMessage(w http.ResponseWriter, r *http.Request, m yidu.Message) {
	c, err := s.prog.Counts(r.Context(), m, viewFrom(r.Context()))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	j := toJSON(m)
	j.setCounts(c)
	if err := s.addNotice(r.Context(), principalFrom(r.Context()), &j); err != nil {
		s.fail(w, r, fmt.Errorf("dashboard: notice state: %w", err))
		return
	}
	if scoped(r.Context()) {
		// The send report and the follow-up count the whole notice's
		// people: a scoped caller gets its View's numbers only.
		writeJSON(w, http.StatusOK, j)
		return
	}
	outcomes, err := s.prog.Outcomes(r.Context(), m)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	j.Send = toSendJSON(m.MsgID, outcomes)
	if err := s.addFollowUp(r.Context(), m.CorpID, &j); err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, j)
}

// registerTimeout bounds one POST /messages, sending included.
const registerTimeout = 10 * time.Minute

func (s *Server) handleRegister(w http.ResponseWriter, r *http.Request) {
	p := principalFrom(r.Context())
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		writeError(w, http.StatusUnsupportedMediaType, "Content-Type must be application/json")
		return
	}
	// Registering 100,000 recipients and sending their cards (100 calls to
	// message/send at WeCom's rate) outlasts the server's write timeout;
	// this one request may take longer. Ignored where unsupported.
	_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(registerTimeout))
	name, post, err := decodeRegistration(http.MaxBytesReader(w, r.Body, maxRegisterBody))
	if err != nil {
		s.failBody(w, r, err)
		return
	}
	app, ok := s.apps[name]
	if !ok || !s.decide(r, yidu.ActionSend, access.Target{Corp: app.CorpID, App: app.Name}).Allowed {
		// An app the caller may not send through is, to them, unknown.
		s.fail(w, r, badParam("unknown app %q", yidu.Truncate(name, 64)))
		return
	}
	post.App = app
	res, err := s.acts.Post(r.Context(), p, post)
	s.recordActs(r, app.CorpID, app.Name, res.Acts)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	j, code := noticeJSON(res.Notice), http.StatusCreated // kept for later
	if res.Approval {
		code = http.StatusAccepted // kept until approved (issue 41)
	} else if !res.Kept() {
		j, code = s.registeredJSON(r, res.Registered, post.Send)
	}
	if err := s.addFollowUp(r.Context(), app.CorpID, &j); err != nil {
		s.fail(w, r, err)
		return
	}
	w.Header().Set("Location", "/api/v1/messages/"+j.MsgID)
	writeJSON(w, code, j)
}

// registeredJSON answers a notice registered now (201, 200 for a replay)
// with what sending did, batch by batch: a send that sent nothing must
// say so (issue 13).
func (s *Server) registeredJSON(r *http.Request, res yidu.Registered, send bool) (messageJSON, int) {
	m := res.Message
	// The message page's department panel needs the corp's tree: built
	// now, not on its first view.
	s.prog.WarmDepartments(r.Context(), m.CorpID)
	j := toJSON(m)
	j.UnknownUserIDs = res.UnknownUserIDs
	if send {
		if j.Send = toSendJSON(m.MsgID, res.Send.Outcomes); j.Send == nil {
			j.Send = &sendJSON{Result: "failed", Batches: []batchJSON{}, Missing: res.Send.Missing, BadUserIDs: res.Send.BadUserIDs}
		}
	}
	if res.Created {
		return j, http.StatusCreated
	}
	return j, http.StatusOK
}

// remindJSON is what a reminder did: every non-reader is reminded in
// batches of 1000 whatever their number; one who cannot be sent to is
// skipped and counted, never the others' reminder.
type remindJSON struct {
	Reminded      int       `json:"reminded"`
	NextAllowedAt time.Time `json:"next_allowed_at"`
	// Unread is how many non-readers the reminder was for (members who
	// left excluded).
	Unread int `json:"unread"`
	// Batches is the message/send calls made.
	Batches int `json:"batches"`
	// Refused and Unknown count people in batches WeCom refused, or whose
	// answer was lost; Invalid people WeCom called invaliduser.
	Refused int `json:"refused"`
	Unknown int `json:"unknown"`
	Invalid int `json:"invalid"`
	// Skipped counts members whose UserID breaks WeCom's rule, or who have
	// no UserID in the directory: not sent to.
	Skipped int `json:"skipped"`
}

// handleRemind is POST /messages/{msgid}/remind: campaign decides whom
// the caller may remind (its scope), who is due (the interval is per
// person) and claims the notice in MySQL.
func (s *Server) handleRemind(w http.ResponseWriter, r *http.Request, m yidu.Message) {
	// The reminder outlives an impatient client: half-sent batches are worse.
	// 300,000 non-readers are 300 calls at WeCom's rate: longer than the
	// write timeout of an ordinary answer.
	// An optional body chooses whom by state ({"state": "opened"});
	// campaign checks it.
	var body struct {
		State yidu.ReadState `json:"state"`
	}
	raw, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 1<<10))
	if err != nil {
		s.fail(w, r, fmt.Errorf("%w: more than 1024 bytes", errTooLarge))
		return
	}
	if len(bytes.TrimSpace(raw)) > 0 {
		if err := decodeStrict(bytes.NewReader(raw), &body); err != nil {
			s.fail(w, r, err)
			return
		}
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), registerTimeout)
	defer cancel()
	_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(registerTimeout))
	rep, err := s.acts.Remind(ctx, campaign.Remind{Caller: principalFrom(r.Context()), Message: m, State: body.State})
	// Remind and recall share one rule: the role's refusal is gate's
	// (access.Decide), and campaign gives the rows whatever it answered
	// (busy, too soon, recalled: refused; invalid input: none).
	s.recordActs(r, m.CorpID, m.App, rep.Acts)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.met.reminded.Add(float64(rep.Reminded))
	writeJSON(w, http.StatusOK, remindJSON{Reminded: rep.Reminded, NextAllowedAt: rep.NextAllowedAt.UTC(), Unread: rep.Unread,
		Batches: rep.Batches, Refused: rep.Refused, Unknown: rep.Unknown, Invalid: rep.Invalid, Skipped: rep.Skipped})
}

// recallJSON is the answer of POST /messages/{msgid}/recall.
type recallJSON struct {
	MsgID string `json:"msgid"`
	// RecalledAt is null while a batch is left to recall (502).
	RecalledAt *time.Time `json:"recalled_at"`
	// Read is the read count frozen at the recall.
	Read         int64       `json:"read"`
	Recalled     int         `json:"recalled"`
	Already      int         `json:"already"`
	Unrecallable int         `json:"unrecallable"`
	Failed       []batchJSON `json:"failed"`
	Error        string      `json:"error,omitempty"`
}

// handleRecall recalls every card of the message through WeCom
// (message/recall, doc path 96460) and freezes its numbers (docs/api.md);
// campaign decides who may and claims the notice in MySQL.
func (s *Server) handleRecall(w http.ResponseWriter, r *http.Request, m yidu.Message) {
	// The recall outlives an impatient client: half-recalled is worse.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), 10*time.Minute)
	defer cancel()
	rep, err := s.acts.Recall(ctx, campaign.Recall{Caller: principalFrom(r.Context()), Message: m})
	// One rule with remind: every answer of campaign leaves its row.
	s.recordActs(r, m.CorpID, m.App, rep.Acts)
	if err != nil && !errors.Is(err, yidu.ErrRecallIncomplete) {
		// The tracker's error says why in words HR can act on (409);
		// campaign's refusal is 403, its claim by another 429.
		s.fail(w, r, err)
		return
	}
	out := recallJSON{MsgID: m.MsgID, Read: rep.Read, Recalled: rep.Recalled, Already: rep.Already,
		Unrecallable: rep.Unrecallable, Failed: make([]batchJSON, 0, len(rep.Failed))}
	for _, o := range rep.Failed {
		out.Failed = append(out.Failed, toBatchJSON(m.MsgID, o))
	}
	if err != nil {
		code, msg := httpStatus(err)
		out.Error = msg
		writeJSON(w, code, out)
		return
	}
	at := rep.RecalledAt.UTC()
	out.RecalledAt = &at
	writeJSON(w, http.StatusOK, out)
}
