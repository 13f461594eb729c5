package evidence

import (
	"fmt"
	"io"
	"math"
	"strings"
	"time"

	"codeberg.org/go-pdf/fpdf"
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
var signalWords = map[string]string{
	"button": "已确认（点击「我已阅读」）", "link": "已打开", "enter_agent": "进入应用",
	"read_to_end": "已读至末尾", "acknowledged": "已确认",
}

var sourceWords = map[string]string{"card": "卡片回调", "page": "阅读页", "app": "应用事件"}

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
)

type pdfLine struct {
	kind  lineKind
	text  string
	value string
	// keep: always printed (the ledger's heading, the day roots and the
	// closing note); space for them is kept at the bottom of the page, and
	// lines before them are left out instead when the page is full.
	keep bool
}

// extra estimates what l takes beyond its first line when it wraps.
func extra(p *fpdf.Fpdf, width float64, l pdfLine) float64 {
	size, h := 9.5, 5.0
	switch l.kind {
	case lineHeading, lineHash:
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

// height is the space a kept line takes (it fits one line).
func (l pdfLine) height() float64 {
	switch l.kind {
	case lineHeading:
		return 8
	case lineSmall:
		return 2 * 3.8
	default:
		return 5
	}
}

func (s *Service) pdfLines(rec Record) []pdfLine {
	var out []pdfLine
	h := func(t string) { out = append(out, pdfLine{kind: lineHeading, text: t}) }
	t := func(format string, a ...any) {
		out = append(out, pdfLine{kind: lineText, text: fmt.Sprintf(format, a...)})
	}
	small := func(format string, a ...any) {
		out = append(out, pdfLine{kind: lineSmall, text: fmt.Sprintf(format, a...)})
	}
	hash := func(label, value string) { out = append(out, pdfLine{kind: lineHash, text: label, value: value}) }

	h("一、通知")
	t("标题：%s", rec.Title)
	t("通知编号：%s　应用：%s　企业：%s　发送时间：%s", rec.MsgID, rec.App, rec.CorpID, s.at(rec.SentAt))

	h("二、接收人")
	depts := make([]string, 0, len(rec.Person.Departments))
	for _, d := range rec.Person.Departments {
		if d.Name != "" {
			depts = append(depts, d.Name)
		} else {
			depts = append(depts, fmt.Sprintf("部门 %d", d.ID))
		}
	}
	name := rec.Person.Name
	if rec.Person.Left {
		name += "（已离职）"
	}
	t("姓名：%s　账号（UserID）：%s", name, rec.Person.UserID)
	if rec.Person.DepartmentsAsOf == "send" && rec.Person.DepartmentsAt != nil {
		t("发送时部门：%s（%s 发送时的通讯录）", orDash(strings.Join(depts, "、")), s.at(*rec.Person.DepartmentsAt))
	} else {
		t("部门：%s（为生成本确认书时的通讯录：本通知发送时系统尚未保存部门）", orDash(strings.Join(depts, "、")))
	}

	h("三、通知内容的版本")
	if len(rec.Versions) == 0 {
		t("本通知无正文版本（仅卡片）。")
	}
	for _, v := range rec.Versions {
		re := ""
		if v.Reacknowledge {
			re = "，需重新确认"
		}
		t("版本 %d（%s 发布%s）：%s", v.N, s.at(v.CreatedAt), re, v.Title)
		hash("　sha256：", v.SHA256)
	}

	h("四、送达")
	if len(rec.Deliveries) == 0 {
		t("无发送记录。")
	}
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
		t("%s　第 %d 批　%s（errcode %d%s）　企业微信 msgid：%s　版本 %d", s.at(d.At), d.Batch+1, orWord(statusWords, d.Status), d.ErrCode, inv, orDash(d.WeComMsgID), d.Version)
	}

	h("五、阅读与确认记录")
	if len(rec.Signals) == 0 {
		t("无阅读记录（未读）。")
	}
	for _, sg := range rec.Signals {
		ver := fmt.Sprintf("版本 %d", sg.Version)
		if sg.VersionInferred {
			ver += "（按时间推定）"
		}
		counted := ""
		if sg.CountedAsRead {
			counted = "，计为已读"
		}
		t("%s　%s　%s　来源：%s%s", s.at(sg.At), orWord(signalWords, sg.Kind), ver, orWord(sourceWords, sg.Source), counted)
		if sg.ClientIP != "" || sg.UserAgent != "" {
			small("　IP：%s　User-Agent：%s", orDash(sg.ClientIP), orDash(sg.UserAgent))
		}
	}

	h("六、提醒与跟进")
	if len(rec.FollowUps) == 0 {
		t("无。")
	}
	for _, f := range rec.FollowUps {
		round := ""
		switch f.Kind {
		case "reminder":
			round = fmt.Sprintf("第 %d 次", f.Round)
		case "update_card":
			round = fmt.Sprintf("版本 %d ", f.Version)
		}
		t("%s　%s%s　%s", s.at(f.At), round, orWord(followUpWords, f.Kind), f.Outcome)
	}

	// The ledger's section comes last and its day roots are always
	// printed (issue 40: each day's root is on the PDFs of that day): the
	// heading, the roots and the note are kept, and the person's entries
	// are one compact line per day.
	out = append(out, pdfLine{kind: lineHeading, text: "七、防篡改账本", keep: true})
	if !rec.LedgerConnected {
		t("未接入账本：本确认书中的记录未附账本位置与包含证明。")
	} else {
		if len(rec.Ledger) == 0 {
			t("账本中无此人的记录。")
		}
		byDay := map[string][]string{}
		for _, e := range rec.Ledger {
			byDay[e.Day] = append(byDay[e.Day], fmt.Sprintf("%d/%d %s", e.Seq, e.Index, e.Kind))
		}
		for _, day := range sortedKeys(rec.Roots) {
			out = append(out, pdfLine{kind: lineHash, text: day + " 日根哈希：", value: rec.Roots[day], keep: true})
			if es := byDay[day]; len(es) > 0 {
				t("%s 本人条目（序号/日树位置 类型）：%s", day, strings.Join(es, "，"))
			}
		}
	}
	out = append(out, pdfLine{kind: lineSmall, keep: true,
		text: "时间为北京时间（UTC+8）。版本的 sha256 为通知内容的规范哈希；账本与证明的核验方法见 docs/evidence-records.md，可用 yidu evidence check 离线核验。"})
	return out
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
