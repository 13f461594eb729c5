package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/campaign"
	"github.com/yidu-io/yidu/internal/wecomsim"
	"github.com/yidu-io/yidu/ledger"
)

// What the demo shows once every read of the notice to everyone arrived:
// a hosted notice read to the end and acknowledged on the reading page,
// held for approval first (apps[].approval: acknowledged), one member's
// evidence, and the ledger verified.

// roundMembers is how many members get the hosted notice; the first
// roundAcks of them read it to the end and acknowledge it, the next one
// only opens it, the rest never do.
const (
	roundMembers = 6
	roundAcks    = 4
	roundTitle   = "员工手册（2026版）确认 / Staff handbook"
	roundText    = "# 员工手册（2026版）\n\n" +
		"## 第一条 考勤\n\n自12月1日起实行弹性打卡，核心时间为10:00至16:00。\n\n" +
		"## 第二条 保密\n\n| 资料 | 级别 |\n|:--|:--|\n| 客户名单 | 机密 |\n| 报价 | 秘密 |\n\n" +
		"请阅读全文及附件，然后点击“我已阅读并知悉”。\n"
)

// Round is what the demo's extra steps did, for the banner and the tests.
type Round struct {
	// MsgID is the hosted notice; Members its recipients.
	MsgID   string
	Members []string
	// ApprovalMsgID is the notice to 全员 that waited for approval; Held:
	// it was 待审批 with no card sent; SentOnce: once approved, each
	// employee got exactly one card.
	ApprovalMsgID  string
	Held, SentOnce bool
	// BySignal are the notice's counts once the members were done.
	BySignal yidu.SignalCounts
	// EvidenceDir holds the evidence JSON and PDF of Members[0].
	EvidenceDir    string
	EvidenceJSON   string
	EvidencePDF    string
	EvidenceAcked  bool
	Root           ledger.DayRoot
	Entries, Facts int
	Problems       []ledger.Problem
}

// showRound runs the steps above, printing each.
func (m *Main) showRound(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	start := time.Now()
	r := &m.Round
	r.MsgID = m.MsgID + "-ack"
	for i := range roundMembers {
		r.Members = append(r.Members, wecomsim.UserID(i))
	}
	w := m.Stdout
	fmt.Fprintf(w, "\nThis round: a notice with its full text and a PDF on the reading page (read_rule acknowledged) to %d members, their evidence, an approval, the ledger.\n", roundMembers)

	att, err := m.uploadPDF(ctx)
	if err != nil {
		return err
	}
	body := map[string]any{
		"msgid": r.MsgID, "app": demoApp, "title": roundTitle, "send": true,
		"audience":  map[string]any{"userids": r.Members},
		"content":   map[string]any{"markdown": roundText, "attachments": []string{att}},
		"read_rule": "acknowledged",
	}
	code, err := m.api(ctx, http.MethodPost, "/messages", body, nil)
	if err != nil || code != http.StatusCreated {
		return fmt.Errorf("hosted notice: %d %v", code, err)
	}
	if err := m.awaitCards(ctx, r.MsgID, r.Members); err != nil {
		return err
	}
	fmt.Fprintf(w, "  1. %s sent: its card opens the reading page /r/%s/%s (content version 1, with the PDF)\n", r.MsgID, demoApp, r.MsgID)

	for i, u := range r.Members[:roundAcks+1] {
		if err := m.readOnPage(ctx, u, i < roundAcks); err != nil {
			return fmt.Errorf("reading page as %s: %w", u, err)
		}
	}
	fmt.Fprintf(w, "  2. %d members signed in with WeCom on the reading page /r/%s/%s; %d read it to the end and pressed 我已阅读并知悉\n",
		roundAcks+1, demoApp, r.MsgID, roundAcks)
	var msg struct {
		BySignal *yidu.SignalCounts `json:"by_signal"`
	}
	if _, err := m.api(ctx, http.MethodGet, "/messages/"+url.PathEscape(r.MsgID), nil, &msg); err != nil || msg.BySignal == nil {
		return fmt.Errorf("hosted notice's counts: %v (by_signal %v)", err, msg.BySignal)
	}
	r.BySignal = *msg.BySignal
	fmt.Fprintf(w, "  3. by_signal: link %d, read_to_end %d, acknowledged %d (of %d)\n",
		r.BySignal.Link, r.BySignal.ReadToEnd, r.BySignal.Acknowledged, roundMembers)

	if err := m.saveEvidence(ctx, r.Members[0]); err != nil {
		return err
	}
	fmt.Fprintf(w, "  4. evidence of %s: %s and %s\n", r.Members[0], r.EvidenceJSON, r.EvidencePDF)

	if err := m.approve(ctx); err != nil {
		return err
	}

	l, err := ledger.New(m.App.DB, ledger.Options{Logger: m.Logger})
	if err != nil {
		return err
	}
	day := ledger.Day(time.Now())
	rep, err := l.Verify(ctx, demoCorp, day)
	if err != nil {
		return fmt.Errorf("ledger verify: %w", err)
	}
	if r.Root, err = l.Root(ctx, demoCorp, day); err != nil {
		return fmt.Errorf("ledger root: %w", err)
	}
	r.Entries, r.Facts, r.Problems = rep.Entries, rep.Facts, rep.Problems
	fmt.Fprintf(w, "  9. ledger of %s, day %s (Asia/Shanghai): %d entries, root %s (as yidu evidence verify)\n", demoCorp, day, r.Root.Size, r.Root.Root)
	if len(rep.Problems) > 0 {
		for _, p := range rep.Problems {
			fmt.Fprintf(w, "     %s\n", p)
		}
		return fmt.Errorf("ledger verify: %d problems", len(rep.Problems))
	}
	fmt.Fprintf(w, "     verify: clean (%d entries, %d facts checked)\n", rep.Entries, rep.Facts)
	fmt.Fprintf(w, "These steps took %.1fs.\n\n", time.Since(start).Seconds())
	return nil
}

// uploadPDF uploads a one-page PDF as the notice's attachment and returns
// its id.
func (m *Main) uploadPDF(ctx context.Context) (string, error) {
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	fw, err := mw.CreateFormFile("file", "员工手册附件.pdf")
	if err != nil {
		return "", err
	}
	if _, err := fw.Write(onePagePDF("Staff handbook 2026 - annex")); err != nil {
		return "", err
	}
	if err := mw.Close(); err != nil {
		return "", err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+m.App.DashboardAddr+"/api/v1/attachments?app="+demoApp, &buf)
	if err != nil {
		return "", err
	}
	req.Header.Set("Authorization", "Bearer "+m.APIToken)
	req.Header.Set("Content-Type", mw.FormDataContentType())
	var out struct {
		ID string `json:"id"`
	}
	if err := doJSON(req, http.StatusCreated, &out); err != nil {
		return "", fmt.Errorf("upload attachment: %w", err)
	}
	return out.ID, nil
}

// onePagePDF returns a minimal PDF 1.4 of one page showing text (ASCII).
func onePagePDF(text string) []byte {
	stream := fmt.Sprintf("BT /F1 18 Tf 72 720 Td (%s) Tj ET", text)
	objs := []string{
		"<< /Type /Catalog /Pages 2 0 R >>",
		"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
		"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 595 842] /Contents 4 0 R /Resources << /Font << /F1 5 0 R >> >> >>",
		fmt.Sprintf("<< /Length %d >>\nstream\n%s\nendstream", len(stream), stream),
		"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
	}
	var b bytes.Buffer
	b.WriteString("%PDF-1.4\n")
	offs := make([]int, len(objs))
	for i, o := range objs {
		offs[i] = b.Len()
		fmt.Fprintf(&b, "%d 0 obj\n%s\nendobj\n", i+1, o)
	}
	xref := b.Len()
	fmt.Fprintf(&b, "xref\n0 %d\n0000000000 65535 f \n", len(objs)+1)
	for _, o := range offs {
		fmt.Fprintf(&b, "%010d 00000 n \n", o)
	}
	fmt.Fprintf(&b, "trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n", len(objs)+1, xref)
	return b.Bytes()
}

// cardsOf counts the cards of notice msgID the fake WeCom got, by
// member.
func (m *Main) cardsOf(msgID string) map[string]int {
	out := map[string]int{}
	for _, s := range m.Fake.Sent() {
		var b struct {
			ToUser       string `json:"touser"`
			TemplateCard struct {
				TaskID string `json:"task_id"`
			} `json:"template_card"`
		}
		if json.Unmarshal(s.Raw, &b) != nil || !sameMsg(b.TemplateCard.TaskID, msgID) {
			continue
		}
		if _, _, ok := yidu.ParseApprovalTaskID(b.TemplateCard.TaskID); ok {
			continue // the approval card, not the notice's
		}
		for _, u := range strings.Split(b.ToUser, "|") {
			out[u]++
		}
	}
	return out
}

// awaitCards waits until each of members has notice msgID's card, then
// half a second more, and checks that nobody else got it and nobody got
// it twice.
func (m *Main) awaitCards(ctx context.Context, msgID string, members []string) error {
	t := time.NewTicker(200 * time.Millisecond)
	defer t.Stop()
	for len(m.cardsOf(msgID)) < len(members) {
		select {
		case <-t.C:
		case <-ctx.Done():
			return fmt.Errorf("%s: cards to %d of %d members: %w", msgID, len(m.cardsOf(msgID)), len(members), ctx.Err())
		}
	}
	select {
	case <-time.After(500 * time.Millisecond):
	case <-ctx.Done():
		return ctx.Err()
	}
	got := m.cardsOf(msgID)
	if len(got) != len(members) {
		return fmt.Errorf("%s: cards to %d members; want %d", msgID, len(got), len(members))
	}
	for _, u := range members {
		if n := got[u]; n != 1 {
			return fmt.Errorf("%s: %s got %d cards; want 1", msgID, u, n)
		}
	}
	return nil
}

// approve shows approval before sending: a notice to 全员 (apps[].approval)
// is held 待审批 with no card sent; the approver gets the approval card
// through WeCom and presses 批准 (a callback to the receiver, delivered
// twice as WeCom may); the campaign runner then sends the notice once.
func (m *Main) approve(ctx context.Context) error {
	r, w := &m.Round, m.Stdout
	r.ApprovalMsgID = m.MsgID + "-all"
	body := map[string]any{
		"msgid": r.ApprovalMsgID, "app": demoApp, "title": "年终总结会通知 / Year-end meeting", "send": true,
		"body":     "12月20日14:00全员年终总结会，请准时参加。All hands, 20 Dec 14:00.",
		"audience": map[string]any{"all": true},
	}
	var posted struct {
		Approval string `json:"approval"`
	}
	code, err := m.api(ctx, http.MethodPost, "/messages", body, &posted)
	if err != nil {
		return fmt.Errorf("notice to 全员: %w", err)
	}
	path := "/messages/" + url.PathEscape(r.ApprovalMsgID) + "/approval"
	var ap struct {
		State       string `json:"state"`
		VersionHash string `json:"version_hash"`
		Recipients  uint64 `json:"recipients"`
	}
	if _, err := m.api(ctx, http.MethodGet, path, nil, &ap); err != nil {
		return fmt.Errorf("approval: %w", err)
	}
	held := len(m.cardsOf(r.ApprovalMsgID))
	r.Held = code == http.StatusAccepted && posted.Approval == string(yidu.ApprovalPending) && ap.State == string(yidu.ApprovalPending) && held == 0
	if !r.Held {
		return fmt.Errorf("notice to 全员: %d, approval %q/%q, %d cards; want 202, pending and none sent", code, posted.Approval, ap.State, held)
	}
	fmt.Fprintf(w, "  5. %s to 全员 (%d people) by %s: 待审批, no card sent (apps[].approval: 全员 or over %d)\n",
		r.ApprovalMsgID, ap.Recipients, demoUser, m.employees)

	c, err := m.awaitApprovalCard(ctx, r.ApprovalMsgID)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "  6. the approval card (version %.12s…) reached %s through WeCom\n", ap.VersionHash, m.Approver)
	ev := wecomsim.Event{Kind: wecomsim.KindCard, UserID: m.Approver, TaskID: c.TaskID, EventKey: c.Key, CreateTime: time.Now()}
	reqs, err := m.player.pusher.Build([]wecomsim.Event{ev})
	if err != nil {
		return err
	}
	// WeCom may deliver the press twice; the second changes nothing.
	if st := m.player.pusher.Push(ctx, []wecomsim.Request{reqs[0], reqs[0]}); st.Failures != 0 {
		return fmt.Errorf("approval press: %s", st)
	}
	if _, err := m.api(ctx, http.MethodGet, path, nil, &ap); err != nil || ap.State != string(yidu.ApprovalApproved) {
		return fmt.Errorf("approval after the press: %q, %v; want approved", ap.State, err)
	}
	fmt.Fprintf(w, "  7. %s pressed 批准 (the callback delivered twice): 已批准\n", m.Approver)
	everyone := make([]string, len(m.company.Users))
	for i, u := range m.company.Users {
		everyone[i] = u.UserID
	}
	if err := m.awaitCards(ctx, r.ApprovalMsgID, everyone); err != nil {
		return err
	}
	r.SentOnce = true
	fmt.Fprintf(w, "  8. sent once by the campaign runner: one card to each of the %d people\n", len(everyone))
	return nil
}

// awaitApprovalCard waits for the approval card of msgID to reach the
// approver and returns its task_id and 批准's key.
func (m *Main) awaitApprovalCard(ctx context.Context, msgID string) (card, error) {
	t := time.NewTicker(200 * time.Millisecond)
	defer t.Stop()
	for {
		for _, s := range m.Fake.Sent() {
			var b struct {
				ToUser       string `json:"touser"`
				TemplateCard struct {
					TaskID     string `json:"task_id"`
					ButtonList []struct {
						Key string `json:"key"`
					} `json:"button_list"`
				} `json:"template_card"`
			}
			if json.Unmarshal(s.Raw, &b) != nil {
				continue
			}
			id, _, ok := yidu.ParseApprovalTaskID(b.TemplateCard.TaskID)
			if !ok || string(id) != msgID || !slices.Contains(strings.Split(b.ToUser, "|"), m.Approver) {
				continue
			}
			for _, bt := range b.TemplateCard.ButtonList {
				if bt.Key == campaign.ApproveKey {
					return card{TaskID: b.TemplateCard.TaskID, Key: bt.Key}, nil
				}
			}
		}
		select {
		case <-t.C:
		case <-ctx.Done():
			return card{}, fmt.Errorf("%s: no approval card reached %s: %w", msgID, m.Approver, ctx.Err())
		}
	}
}

var viewRE = regexp.MustCompile(`data-view="([^"]+)"[^>]*data-version="([0-9]+)"`)

// readOnPage is one member on the reading page, in a browser of their
// own: signed in through the fake WeCom's OAuth2, the page opened (link),
// and with ack its end reached (read_to_end) and 我已阅读并知悉 pressed
// (acknowledged), through the receiver's events endpoint.
func (m *Main) readOnPage(ctx context.Context, userID string, ack bool) error {
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar, Timeout: 30 * time.Second}
	page := "http://" + m.App.ReceiverAddr + "/r/" + demoApp + "/" + url.PathEscape(m.Round.MsgID)
	get := func(target string) (*http.Response, []byte, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
		if err != nil {
			return nil, nil, err
		}
		req.Header.Set("User-Agent", "Mozilla/5.0 (iPhone) wxwork/4.1 MicroMessenger")
		resp, err := c.Do(req)
		if err != nil {
			return nil, nil, err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
		return resp, b, err
	}
	// The page sends a member without a session to WeCom's sign-in (the
	// fake's member list); choosing the member comes back signed in.
	resp, _, err := get(page)
	if err != nil {
		return err
	}
	if resp.Request.URL.Host != m.fakeSrv.Addr {
		return fmt.Errorf("GET %s ended %d at %s; want WeCom's sign-in", page, resp.StatusCode, resp.Request.URL)
	}
	signIn := resp.Request.URL
	q := signIn.Query()
	q.Set("as", userID)
	signIn.RawQuery = q.Encode()
	resp, html, err := get(signIn.String())
	if err != nil {
		return err
	}
	sm := viewRE.FindSubmatch(html)
	if resp.StatusCode != http.StatusOK || sm == nil {
		return fmt.Errorf("signed in, the page answered %d at %s without a view", resp.StatusCode, resp.Request.URL)
	}
	if !ack {
		return nil
	}
	for _, ev := range []string{"read_to_end", "acknowledged"} {
		b := fmt.Sprintf(`{"event":%q,"version":%s,"view":%q}`, ev, sm[2], sm[1])
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, page+"/events", strings.NewReader(b))
		if err != nil {
			return err
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := c.Do(req)
		if err != nil {
			return err
		}
		out, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("event %s: %d %s", ev, resp.StatusCode, bytes.TrimSpace(out))
		}
	}
	return nil
}

// saveEvidence writes userID's evidence record (JSON) and 告知确认书 (PDF)
// from the dashboard API into EvidenceDir (a new temporary directory when
// empty), once the record holds the acknowledgement (flushd wrote it).
func (m *Main) saveEvidence(ctx context.Context, userID string) error {
	r := &m.Round
	if r.EvidenceDir = m.EvidenceDir; r.EvidenceDir == "" {
		dir, err := os.MkdirTemp("", "yidu-demo-evidence-")
		if err != nil {
			return fmt.Errorf("evidence: %w", err)
		}
		r.EvidenceDir = dir
	}
	base := "http://" + m.App.DashboardAddr + "/api/v1/messages/" + url.PathEscape(r.MsgID) + "/evidence/" + url.PathEscape(userID)
	var rec []byte
	t := time.NewTicker(500 * time.Millisecond)
	defer t.Stop()
	for {
		b, err := m.fetch(ctx, base)
		if err != nil {
			return fmt.Errorf("evidence: %w", err)
		}
		rec = b
		if r.EvidenceAcked = acknowledgedIn(b); r.EvidenceAcked {
			break
		}
		select {
		case <-t.C:
		case <-ctx.Done():
			return fmt.Errorf("evidence of %s: no acknowledgement in MySQL yet: %w", userID, ctx.Err())
		}
	}
	pdf, err := m.fetch(ctx, base+".pdf")
	if err != nil {
		return fmt.Errorf("evidence PDF: %w", err)
	}
	if !bytes.HasPrefix(pdf, []byte("%PDF-")) {
		return errors.New("evidence PDF: not a PDF")
	}
	r.EvidenceJSON = filepath.Join(r.EvidenceDir, "evidence-"+userID+".json")
	r.EvidencePDF = filepath.Join(r.EvidenceDir, "evidence-"+userID+".pdf")
	if err := os.WriteFile(r.EvidenceJSON, rec, 0o644); err != nil {
		return fmt.Errorf("evidence: %w", err)
	}
	if err := os.WriteFile(r.EvidencePDF, pdf, 0o644); err != nil {
		return fmt.Errorf("evidence: %w", err)
	}
	return nil
}

// acknowledgedIn reports whether an evidence record shows the member
// read, with an acknowledged signal.
func acknowledgedIn(rec []byte) bool {
	var v struct {
		Read    bool `json:"read"`
		Signals []struct {
			Kind string `json:"kind"`
		} `json:"signals"`
	}
	if json.Unmarshal(rec, &v) != nil || !v.Read {
		return false
	}
	for _, s := range v.Signals {
		if s.Kind == "acknowledged" {
			return true
		}
	}
	return false
}

// fetch GETs target with the demo's token: the body of a 200.
func (m *Main) fetch(ctx context.Context, target string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+m.APIToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %d %s", target, resp.StatusCode, bytes.TrimSpace(b))
	}
	return b, nil
}

// doJSON does req and decodes an answer of status want into out.
func doJSON(req *http.Request, want int, out any) error {
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode != want {
		return fmt.Errorf("%s %s: %d %s", req.Method, req.URL.Path, resp.StatusCode, bytes.TrimSpace(b))
	}
	return json.Unmarshal(b, out)
}
