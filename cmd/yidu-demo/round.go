package main

import (
	"bytes"
	"context"
	"fmt"
	"mime/multipart"
	"net/http"
	"net/url"
	"time"

	"github.com/yidu-io/yidu"
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
	// StandingMsgID is the standing notice (issue 51); JoinerCarded: the
	// new hire got its card after the sync; PendingJoiners its 新入职待确认.
	StandingMsgID  string
	JoinerCarded   bool
	PendingJoiners int
	// BySignal are the notice's counts once the members were done.
	BySignal yidu.SignalCounts
	// EvidenceDir holds the evidence JSON and PDF of Members[0].
	EvidenceDir   string
	EvidenceJSON  string
	EvidencePDF   string
	EvidenceAcked bool
	// Reminded is how many the manual reminder before the evidence
	// reached; ZIPBytes the notice's evidence ZIP after it, and
	// OwnPDFBytes the reminded member's PDF from 我的记录.
	Reminded, ZIPBytes, OwnPDFBytes int
	Root                            ledger.Checkpoint
	// PackZIP is the notice's evidence ZIP, checked (PackChecked, against
	// PackCheckpoint, PackFacts facts proved); ForgedZIP a copy with one
	// member's claim moved onto another and rehashed, which the check
	// refused (ForgedProblems).
	PackZIP, ForgedZIP string
	PackChecked        bool
	PackCheckpoint     string
	PackFacts          int
	ForgedProblems     []string
	Entries, Facts     int
	Problems           []ledger.Problem
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

	if err := m.remindThenEvidence(ctx); err != nil {
		return err
	}
	fmt.Fprintf(w, "     reminded %d unread; then %s's evidence (JSON, PDF), the notice's evidence ZIP (%d bytes) and 我的记录's PDF (%d bytes)\n",
		r.Reminded, r.Members[roundAcks], r.ZIPBytes, r.OwnPDFBytes)

	if err := m.approve(ctx); err != nil {
		return err
	}
	if err := m.showStanding(ctx); err != nil {
		return err
	}

	// The process's ledger: it signs with the demo's key.
	l := m.App.Ledger
	if r.Root, err = l.Checkpoint(ctx, demoCorp); err != nil {
		return fmt.Errorf("ledger checkpoint: %w", err)
	}
	rep, err := l.Verify(ctx, demoCorp, "")
	if err != nil {
		return fmt.Errorf("ledger verify: %w", err)
	}
	r.Entries, r.Facts, r.Problems = rep.Entries, rep.Facts, rep.Problems
	fmt.Fprintf(w, " 10. ledger of %s: checkpoint %s of %d entries, root %s (as yidu evidence verify)\n", demoCorp, r.Root.Origin, r.Root.Size, r.Root.Root)
	if len(rep.Problems) > 0 {
		for _, p := range rep.Problems {
			fmt.Fprintf(w, "     %s\n", p)
		}
		return fmt.Errorf("ledger verify: %d problems", len(rep.Problems))
	}
	fmt.Fprintf(w, "     verify: clean (%d entries, %d facts checked)\n", rep.Entries, rep.Facts)
	if err := m.checkPack(ctx); err != nil {
		return err
	}
	fmt.Fprintf(w, " 11. evidence ZIP %s: yidu evidence check --key %s: OK, %d facts proved against the signed checkpoint %s\n",
		r.PackZIP, m.LedgerKey, r.PackFacts, r.PackCheckpoint)
	fmt.Fprintf(w, "     a forged copy (%s's record moved into %s's folder, manifest rehashed) %s: refused:\n", r.Members[0], r.Members[1], r.ForgedZIP)
	for i, p := range r.ForgedProblems {
		if i == 3 {
			fmt.Fprintf(w, "       … and %d more\n", len(r.ForgedProblems)-3)
			break
		}
		fmt.Fprintf(w, "       %s\n", p)
	}
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
