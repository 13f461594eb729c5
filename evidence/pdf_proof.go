package evidence

import (
	"bytes"
	"encoding/json"
	"fmt"
	"image"
	_ "image/png" // the QR code's size
	"strconv"
	"strings"

	"codeberg.org/go-pdf/fpdf"
	qrcode "github.com/skip2/go-qrcode"
	"github.com/transparency-dev/formats/log"

	"github.com/yidu-io/yidu"
)

// The proof block of the 告知确认书 (issue 48): the decisive entry's
// audit path, one sibling hash a line in Courier, and a QR code of the
// same proof at its right.
const (
	pathSize   = 7.0 // pt, the path's hashes
	pathLine   = 3.2 // mm a hash
	qrModulePx = 4   // pixels a QR module in the embedded PNG
	// qrModule is the printed side of a module (mm), for a phone's
	// camera; the QR code's side is kept between qrMin and qrMax.
	qrModule, qrMin, qrMax = 0.4, 35.0, 60.0
	// ProofPayloadHeader is the first line of the QR code's payload
	// (docs/evidence-records.md, "The proof on the PDF").
	ProofPayloadHeader = "yidu-proof/1"
)

// The words the proof block prints (templateText holds them all).
var (
	whyWords = map[string]string{
		"ack":      "确认知悉，其确认使其计为已读",
		"ack_only": "确认知悉",
		"read":     "计为已读",
		"sent":     "送达",
		"tried":    "发送（未送达）",
	}
	proofWords = []string{proofEntry, proofLeaf, proofRoot, proofPath, proofNoPath, proofNoQR, proofNone}
)

const (
	proofEntry  = "关键条目（%s）：%s　日志位置（叶序号）%d　证明针对条目数 %d"
	proofLeaf   = "叶哈希："
	proofRoot   = "证明的根哈希："
	proofPath   = "审计路径（%d 个兄弟哈希，自叶向根；按 RFC 9162 逐个合并叶哈希应得根哈希；右侧二维码载有同一证明）："
	proofNoPath = "审计路径为空：树中只有此一个条目，叶哈希即根哈希。"
	proofNoQR   = "二维码未能生成：%v"
	proofNone   = "账本中无可出示包含证明的本人条目。"
)

// pdfProof is the inclusion proof of the record's decisive entry as the
// PDF prints it (hex): the leaf's index and hash, the tree's size and
// root, the audit path, and the checkpoint's origin.
type pdfProof struct {
	Origin string
	Size   int64
	Root   string
	Index  int64
	Leaf   string
	Path   []string
	// png is the QR code of Payload (qrErr: why there is none) and side
	// its printed side in mm.
	png   []byte
	qrErr error
	side  float64
}

// Payload is the QR code's text: lines of ProofPayloadHeader, the
// origin, the tree size, the root, the leaf index, the leaf hash, then
// one line per audit path hash, leaf to root (hex, lower case).
func (pp *pdfProof) Payload() string {
	lines := append([]string{ProofPayloadHeader, pp.Origin, strconv.FormatInt(pp.Size, 10), pp.Root,
		strconv.FormatInt(pp.Index, 10), pp.Leaf}, pp.Path...)
	return strings.Join(lines, "\n")
}

// QR is the QR code of Payload as a PNG of qrModulePx pixels a module,
// with medium error correction, or low when a long path does not fit.
func (pp *pdfProof) QR() ([]byte, error) {
	q, err := qrcode.New(pp.Payload(), qrcode.Medium)
	if err != nil {
		q, err = qrcode.New(pp.Payload(), qrcode.Low)
	}
	if err != nil {
		return nil, fmt.Errorf("evidence: proof qr code: %w", err)
	}
	png, err := q.PNG(-qrModulePx)
	if err != nil {
		return nil, fmt.Errorf("evidence: proof qr code: %w", err)
	}
	return png, nil
}

// decisive is the member's entry a panel asks about, and why: their
// acknowledgement when it is what made them read (the read entry's
// source is the acknowledgement: read_rule acknowledged), else their
// read (the newest signal entry), else an acknowledgement that did not
// count, else their first delivered send, else their newest send or
// reminder. Entries without a proof are passed over; ok false: none.
func decisive(es []Entry) (e Entry, why string, ok bool) {
	var ack, read, sent, tried *Entry
	readSource := 0
	for i := range es {
		en := &es[i]
		if en.Proof == nil {
			continue
		}
		var b struct {
			Signal  string `json:"signal"`
			Source  int    `json:"source"`
			ErrCode int64  `json:"errcode"`
		}
		// An anonymised entry has no body: its kind still places it.
		_ = json.Unmarshal([]byte(en.Body), &b)
		switch en.Kind {
		case "page":
			if b.Signal == yidu.SignalAcknowledged.String() {
				ack = en
			}
		case "signal":
			read, readSource = en, b.Source
		case "send", "reminder":
			if en.Kind == "send" && b.ErrCode == 0 && en.Body != "" && sent == nil {
				sent = en
			}
			tried = en
		}
	}
	switch {
	case read != nil && ack != nil && readSource == int(yidu.SignalAcknowledged):
		return *ack, "ack", true
	case read != nil:
		return *read, "read", true
	case ack != nil:
		return *ack, "ack_only", true
	case sent != nil:
		return *sent, "sent", true
	case tried != nil:
		return *tried, "tried", true
	}
	return Entry{}, "", false
}

// proof adds the decisive entry's lines to the ledger's section: which
// entry and why, its leaf hash, the proof's root when the page's
// checkpoint is not the one it leads to, and the audit path with its QR
// code. All are kept: the page leaves the member's other lines out
// first.
func (w *certLines) proof(rec Record, cp log.Checkpoint, hasCP bool) {
	e, why, ok := decisive(rec.Ledger)
	if !ok {
		w.add(pdfLine{kind: lineText, keep: true, text: proofNone})
		return
	}
	pd := e.Proof
	pp := &pdfProof{Size: pd.TreeSize, Root: pd.Root, Index: pd.Index, Leaf: e.LeafHash, Path: pd.Path}
	if c, ok := parseCheckpointText(pd.Checkpoint); ok {
		pp.Origin = c.Origin
	} else if hasCP {
		pp.Origin = cp.Origin
	}
	pp.png, pp.qrErr = pp.QR()
	pp.side = qrMin
	if c, _, err := image.DecodeConfig(bytes.NewReader(pp.png)); err == nil {
		pp.side = min(max(float64(c.Width/qrModulePx)*qrModule, qrMin), qrMax)
	}
	w.add(pdfLine{kind: lineText, keep: true, text: fmt.Sprintf(proofEntry, orWord(entryWords, e.Kind), whyWords[why], pp.Index, pp.Size)})
	w.add(pdfLine{kind: lineHash, keep: true, text: proofLeaf, value: pp.Leaf})
	if !hasCP || int64(cp.Size) != pp.Size || fmt.Sprintf("%x", cp.Hash) != pp.Root {
		w.add(pdfLine{kind: lineHash, keep: true, text: proofRoot, value: pp.Root})
	}
	label := fmt.Sprintf(proofPath, len(pp.Path))
	if len(pp.Path) == 0 {
		label = proofNoPath
	}
	w.add(pdfLine{kind: lineProof, keep: true, text: label, proof: pp})
}

// height is the space the proof block takes: its label, then the
// path's hashes or the QR code, whichever is taller.
func (pp *pdfProof) height() float64 {
	return 3.8 + max(float64(len(pp.Path)+1)*pathLine, pp.side) + 1
}

// drawProof prints l's proof block: its label, the path's hashes
// numbered from the leaf, and the QR code at the right.
func drawProof(p *fpdf.Fpdf, l pdfLine) {
	pp := l.proof
	write(p, 7.5, 3.8, l.text)
	y0 := p.GetY()
	p.SetFont("Courier", "", pathSize)
	for i, h := range pp.Path {
		p.SetXY(pageMargin, y0+float64(i)*pathLine)
		p.CellFormat(0, pathLine, fmt.Sprintf("%2d %s", i+1, h), "", 0, "L", false, 0, "")
	}
	if pp.qrErr != nil {
		p.SetXY(pageMargin, y0+float64(len(pp.Path))*pathLine)
		write(p, 7.5, 3.8, fmt.Sprintf(proofNoQR, pp.qrErr))
	} else {
		opt := fpdf.ImageOptions{ImageType: "PNG"}
		p.RegisterImageOptionsReader("proof-qr", opt, bytes.NewReader(pp.png))
		p.ImageOptions("proof-qr", 210-pageMargin-pp.side, y0, pp.side, pp.side, false, opt, 0, "")
	}
	p.SetXY(pageMargin, y0+pp.height()-3.8)
}
