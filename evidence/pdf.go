package evidence

import (
	"encoding/hex"
	"fmt"
	"io"
	"math"
	"strings"
	"time"

	"codeberg.org/go-pdf/fpdf"

	"github.com/yidu-io/yidu"
)

// The PDF's page: A4, margins in mm, and the y below which nothing more
// is written (one page; what does not fit is counted, the JSON has all).
const (
	pageMargin = 15.0
	pageBottom = 275.0
)

// statusWords are message_sends.status in the page's words (zh-CN.md).
var statusWords = map[string]string{
	"sent": "已送达", "refused": "发送失败", "unsent": "未发送", "unknown": "结果未知", "nobody": "无接收人",
}

// signalWords are the signals in the page's words (zh-CN.md).
var signalWords = func() map[string]string {
	m := map[string]string{}
	for _, s := range yidu.Signals() {
		m[s.String()] = s.Word() // one glossary (yidu.Signal.Word)
	}
	return m
}()

var sourceWords = map[string]string{"card": "卡片回调", "page": "阅读页", "app": "应用事件"}

// outcomeWords are a follow-up's outcomes, and entryWords the ledger's
// entry kinds, in the page's words: the 告知确认书 is Chinese throughout
// (issue 49).
var outcomeWords = map[string]string{"sent": "已发出", "refused": "发送失败", "unknown": "结果未知", "skipped": "已跳过", "failed": "失败"}

var entryWords = map[string]string{"send": "发送", "reminder": "提醒", "signal": "阅读信号", "page": "阅读页记录", "version": "通知版本", "recall": "撤回", "seen": "卡片与链接信号", "enrol": "加入发送范围"}

var followUpWords = map[string]string{"reminder": "提醒", "digest": "通知部门负责人", "manual": "提醒未读",
	"update_card": "更新卡片（通知已更新，请重新确认）"}

func (s *Service) at(t time.Time) string { return t.In(s.zone).Format("2006-01-02 15:04:05") }

// PDF writes rec as a one-page 告知确认书 to w. Its text is text: the
// font is embedded as a subset with its Unicode map, so pdftotext and a
// reader's search find the name, the UserID, the hashes and the times.
func (s *Service) PDF(w io.Writer, rec Record) error {
	return s.pdf(w, rec, nil)
}

// The template's fixed words outside pdfLines.
const (
	pageTitle    = "告知确认书"
	footerText   = "yidu 生成于（北京时间）　"
	overflowText = "另有 %d 行未能印在本页，见同名 JSON 记录。"
)

// pdf is PDF with the fonts of fc (nil: a cut for this PDF alone).
func (s *Service) pdf(w io.Writer, rec Record, fc *fontCache) error {
	lines := s.pdfLines(rec)
	all := make([]string, 0, 2*len(lines)+2)
	for _, l := range lines {
		all = append(all, l.text, l.value)
	}
	all = append(all, rec.MsgID, rec.Person.UserID)
	if fc == nil {
		fc = newFontCache(all...)
	}
	p := fpdf.New("P", "mm", "A4", "")
	p.SetCreationDate(rec.GeneratedAt)
	p.SetModificationDate(rec.GeneratedAt)
	p.SetTitle("告知确认书 "+rec.MsgID+" "+rec.Person.UserID, true)
	p.SetCreator("yidu", true)
	p.SetAutoPageBreak(false, 0)
	p.SetMargins(pageMargin, pageMargin, pageMargin)
	p.AddUTF8FontFromBytes("cjk", "", fc.fontFor(all...))
	p.AddPage()
	p.SetFont("cjk", "", 18)
	p.CellFormat(0, 10, pageTitle, "", 1, "C", false, 0, "")
	p.Ln(2)
	width := 210 - 2*pageMargin
	skipped := 0
	reserve := 4.0 // the overflow line
	for _, l := range lines {
		if l.keep {
			reserve += l.height()
		}
	}
	for _, l := range lines {
		if l.keep {
			reserve -= l.height()
		} else if p.GetY()+extra(p, width, l) > pageBottom-reserve {
			skipped++
			continue
		}
		switch l.kind {
		case lineHeading:
			p.Ln(1.5)
			p.SetFont("cjk", "", 11.5)
			p.SetFillColor(235, 238, 242)
			p.CellFormat(width, 6.5, l.text, "", 1, "L", true, 0, "")
		case lineHash:
			write(p, 8, 4, l.text)
			p.SetFont("Courier", "", 8)
			p.Write(4, l.value)
			p.Ln(4)
		case lineSmall:
			write(p, 7.5, 3.8, l.text)
		case lineProof:
			drawProof(p, l)
		default:
			write(p, 9.5, 5, l.text)
		}
	}
	if skipped > 0 {
		write(p, 8, 4, fmt.Sprintf(overflowText, skipped))
	}
	p.SetY(285)
	write(p, 7, 4, fmt.Sprintf("yidu 生成于 %s（北京时间）　%s　%s", s.at(rec.GeneratedAt), rec.MsgID, rec.Person.UserID))
	if err := p.Error(); err != nil {
		return fmt.Errorf("evidence: pdf: %w", err)
	}
	if err := p.Output(w); err != nil {
		return fmt.Errorf("evidence: pdf: %w", err)
	}
	return nil
}

// write flows text at size with line height h, then ends the line. The
// CJK font has no Latin letters or digits (Droid Sans Fallback leaves
// them to another font), so runs of ASCII are set in Helvetica, one of
// the PDF's standard fonts, and the rest in the embedded font.
func write(p *fpdf.Fpdf, size, h float64, text string) {
	for len(text) > 0 {
		ascii := text[0] < 0x80
		i := 0
		for i < len(text) && (text[i] < 0x80) == ascii {
			i++
		}
		if ascii {
			p.SetFont("Helvetica", "", size)
		} else {
			p.SetFont("cjk", "", size)
		}
		p.Write(h, text[:i])
		text = text[i:]
	}
	p.Ln(h)
}

type lineKind int

const (
	lineText lineKind = iota
	lineHeading
	lineSmall
	// lineHash: a label, then an ASCII value (a hash) in Courier on the
	// same line: 64 hex digits fit the width and extract as one word.
	lineHash
	// lineProof: the decisive entry's audit path and its QR code
	// (proof; drawProof).
	lineProof
)

type pdfLine struct {
	kind  lineKind
	text  string
	value string
	// keep: always printed (the ledger's heading, the day roots and the
	// closing note); space for them is kept at the bottom of the page, and
	// lines before them are left out instead when the page is full.
	keep bool
	// proof is a lineProof's proof.
	proof *pdfProof
}

// extra estimates what l takes beyond its first line when it wraps.
func extra(p *fpdf.Fpdf, width float64, l pdfLine) float64 {
	size, h := 9.5, 5.0
	switch l.kind {
	case lineHeading, lineHash, lineProof:
		return 0
	case lineSmall:
		size, h = 7.5, 3.8
	}
	p.SetFont("cjk", "", size)
	n := math.Ceil(p.GetStringWidth(l.text) / width)
	if n <= 1 {
		return 0
	}
	return (n - 1) * h
}

// height is the space a kept line takes (a text line fits one line).
func (l pdfLine) height() float64 {
	switch l.kind {
	case lineHeading:
		return 8
	case lineSmall:
		return 2 * 3.8
	case lineHash:
		return 8 // the label's line, then the value's
	case lineProof:
		return l.proof.height()
	default:
		return 5
	}
}

// pdfLines are the certificate's lines of rec, section by section, and
// the closing note.
func (s *Service) pdfLines(rec Record) []pdfLine {
	w := &certLines{at: s.at}
	w.notice(rec)
	w.recipient(rec)
	w.versions(rec)
	w.deliveries(rec)
	w.signals(rec)
	w.followUps(rec)
	w.ledger(rec)
	w.add(pdfLine{kind: lineSmall, keep: true,
		text: "时间为北京时间（UTC+8）。版本的 sha256 为通知内容的规范哈希；全部条目、证明与签名检查点随证据包提供，可按证据包 README 用公开工具或 yidu evidence check 离线核验。"})
	return w.out
}

// certLines builds the certificate's lines section by section; at
// prints a time in the service's zone.
type certLines struct {
	at  func(time.Time) string
	out []pdfLine
}

func (w *certLines) add(l pdfLine)    { w.out = append(w.out, l) }
func (w *certLines) heading(t string) { w.add(pdfLine{kind: lineHeading, text: t}) }
func (w *certLines) text(format string, a ...any) {
	w.add(pdfLine{kind: lineText, text: fmt.Sprintf(format, a...)})
}
func (w *certLines) small(format string, a ...any) {
	w.add(pdfLine{kind: lineSmall, text: fmt.Sprintf(format, a...)})
}

// section starts a section of n lines: its heading, then none when n
// is 0.
func (w *certLines) section(heading string, n int, none string) {
	w.heading(heading)
	if n == 0 {
		w.text("%s", none)
	}
}

func (w *certLines) hash(label, value string) {
	w.add(pdfLine{kind: lineHash, text: label, value: value})
}

// notice is section 1: the notice.
func (w *certLines) notice(rec Record) {
	w.heading("一、通知")
	w.text("标题：%s", rec.Title)
	w.text("通知编号：%s　应用：%s　企业：%s　发送时间：%s", rec.MsgID, rec.App, rec.CorpID, w.at(rec.SentAt))
}

// recipient is section 2: the member, by their name at send, and their
// departments.
func (w *certLines) recipient(rec Record) {
	w.heading("二、接收人")
	depts := make([]string, 0, len(rec.Person.Departments))
	for _, d := range rec.Person.Departments {
		if d.Name != "" {
			depts = append(depts, d.Name)
		} else {
			depts = append(depts, fmt.Sprintf("部门 %d", d.ID))
		}
	}
	name := rec.Person.Name
	if at := rec.Person.NameAtSend; at != "" && at != name {
		// The log's name at send comes first: a rename since (or an
		// edit of the directory) cannot change whom the notice reached.
		name = at + "（发送时姓名；现为 " + name + "）"
	}
	if rec.Person.Left {
		name += "（已离职）"
	}
	w.text("姓名：%s　账号（UserID）：%s", name, rec.Person.UserID)
	if rec.Person.DepartmentsAsOf == "send" && rec.Person.DepartmentsAt != nil {
		w.text("发送时部门：%s（%s 发送时的通讯录）", orDash(strings.Join(depts, "、")), w.at(*rec.Person.DepartmentsAt))
	} else {
		w.text("部门：%s（为生成本确认书时的通讯录：本通知发送时系统尚未保存部门）", orDash(strings.Join(depts, "、")))
	}

	if j := rec.Joined; j != nil {
		told := "尚未发送"
		if j.SentAt != nil {
			told = w.at(*j.SentAt)
		}
		// Two lines: on one, a wrap parted 截止时间 from its time.
		w.text("加入发送范围：%s（常驻通知，首次发送后加入）", w.at(j.JoinedAt))
		w.text("告知时间：%s　截止时间：%s", told, w.at(j.Deadline))
	}
}

// versions is section 3: the notice's versions and their hashes.
func (w *certLines) versions(rec Record) {
	w.section("三、通知内容的版本", len(rec.Versions), "本通知无正文版本（仅卡片）。")
	for _, v := range rec.Versions {
		re := ""
		if v.Reacknowledge {
			re = "，需重新确认"
		}
		w.text("版本 %d（%s 发布%s）：%s", v.N, w.at(v.CreatedAt), re, v.Title)
		w.hash("　sha256：", v.SHA256)
		if v.Opening != "" {
			w.text("　正文开头：%s", v.Opening)
		}
	}
}

// deliveries is section 4: the send batches that held the member.
func (w *certLines) deliveries(rec Record) {
	w.section("四、送达", len(rec.Deliveries), "无发送记录。")
	for _, d := range rec.Deliveries {
		inv := ""
		if d.InvalidUser {
			inv = "，企业微信列为无效账号（invaliduser）"
		}
		switch {
		case d.Unlicensed == nil:
			inv += "，未获许可：未记录"
		case *d.Unlicensed:
			inv += "，企业微信列为未获许可（unlicenseduser）"
		}
		ver := ""
		if d.Version > 0 {
			ver = fmt.Sprintf("　版本 %d", d.Version)
		}
		w.text("%s　第 %d 批　%s（errcode %d%s）　企业微信 msgid：%s%s", w.at(d.At), d.Batch+1, orWord(statusWords, d.Status), d.ErrCode, inv, orDash(d.WeComMsgID), ver)
	}
}

// signals is section 5: the member's reads and confirmations.
func (w *certLines) signals(rec Record) {
	w.section("五、阅读与确认记录", len(rec.Signals), "无阅读记录（未读）。")
	for _, sg := range rec.Signals {
		// A card-only notice has no versions: no "版本 0".
		ver := ""
		if sg.Version > 0 {
			ver = fmt.Sprintf("版本 %d", sg.Version)
			if sg.VersionInferred {
				ver += "（按时间推定）"
			}
		}
		counted := ""
		if sg.CountedAsRead {
			counted = "，计为已读"
		}
		w.text("%s　%s　%s　来源：%s%s", w.at(sg.At), orWord(signalWords, sg.Kind), ver, orWord(sourceWords, sg.Source), counted)
		if sg.ClientIP != "" || sg.UserAgent != "" {
			w.small("　IP：%s　User-Agent：%s", orDash(sg.ClientIP), orDash(sg.UserAgent))
		}
	}
}

// followUps is section 6: reminders and follow-ups.
func (w *certLines) followUps(rec Record) {
	w.section("六、提醒与跟进", len(rec.FollowUps), "无。")
	for _, f := range rec.FollowUps {
		round := ""
		switch f.Kind {
		case "reminder":
			round = fmt.Sprintf("第 %d 次", f.Round)
		case "update_card":
			round = fmt.Sprintf("版本 %d ", f.Version)
		}
		w.text("%s　%s%s　%s", w.at(f.At), round, orWord(followUpWords, f.Kind), orWord(outcomeWords, f.Outcome))
	}
}

// ledger is section 7, the ledger's, which comes last.
func (w *certLines) ledger(rec Record) {
	// The ledger's section comes last and its checkpoint is always
	// printed: the heading, the checkpoint, the decisive entry's proof
	// and the note are kept, and the person's entries are one compact
	// line, left out first when the page is full.
	w.add(pdfLine{kind: lineHeading, text: "七、防篡改账本", keep: true})
	if !rec.LedgerConnected {
		w.text("未接入账本：本确认书中的记录未附账本位置与包含证明。")
	} else {
		if len(rec.Ledger) == 0 {
			w.text("账本中无此人的记录。")
		}
		es := make([]string, 0, len(rec.Ledger))
		for _, e := range rec.Ledger {
			es = append(es, fmt.Sprintf("%d %s", e.Seq-1, orWord(entryWords, e.Kind)))
		}
		if len(es) > 0 {
			w.text("本人条目（日志位置 类型）：%s", strings.Join(es, "，"))
		}
		cp, hasCP := parseCheckpointText(rec.Checkpoint)
		if hasCP {
			signed := "已签名"
			if !strings.Contains(rec.Checkpoint, "\n\n— ") {
				signed = "未签名"
			}
			w.add(pdfLine{kind: lineText, keep: true, text: fmt.Sprintf("检查点（%s）：%s　条目数 %d", signed, cp.Origin, cp.Size)})
			w.add(pdfLine{kind: lineHash, text: "检查点根哈希：", value: hex.EncodeToString(cp.Hash), keep: true})
		} else {
			w.add(pdfLine{kind: lineText, keep: true, text: "尚无检查点：证明针对生成时的账本。"})
		}
		if st := rec.Stamp; st != nil {
			w.add(pdfLine{kind: lineText, keep: true, text: fmt.Sprintf("日检查点 %s（条目数 %d）的可信时间戳（RFC 3161）：%s", st.Day, st.Size, w.at(st.Time))})
		} else {
			w.add(pdfLine{kind: lineText, keep: true, text: "当日检查点尚无可信时间戳。"})
		}
		w.proof(rec, cp, hasCP)
	}
}

func orDash(s string) string {
	if s == "" {
		return "—"
	}
	return s
}

func orWord(words map[string]string, k string) string {
	if w, ok := words[k]; ok {
		return w
	}
	return k
}
