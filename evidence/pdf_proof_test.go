package evidence

import (
	"bytes"
	"context"
	"encoding/hex"
	"image"
	_ "image/png" // image.DecodeConfig of the QR code's PNG
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/transparency-dev/merkle/proof"
	"github.com/transparency-dev/merkle/rfc6962"

	"github.com/yidu-io/yidu/internal/testenv"
	"github.com/yidu-io/yidu/ledger"
)

// proofLedger is a log of others entries around zhangsan's (uid 1):
// their send, the notice's version, then acks page events of theirs
// (acknowledged) and their read by the acknowledgement (source 6), and
// others more entries after.
func proofLedger(t *testing.T, acks, others int) *fakeLedger {
	t.Helper()
	l := newFakeLedger(t, "2026-12-03")
	at := "2026-12-03T02:00:00Z"
	for i := range others {
		l.add("u"+strconv.Itoa(i), uint32(100+i), "send", ledger.Body{"userid": "u" + strconv.Itoa(i), "errcode": 0, "at": at})
	}
	l.add("zhangsan", 1, "send", ledger.Body{"userid": "zhangsan", "name": "张三", "errcode": 0, "at": at})
	l.add("", 0, "version", ledger.Body{"version": 1, "sha256": strings.Repeat("cd", 32)})
	for i := range acks {
		l.add("zhangsan", 1, "page", ledger.Body{"signal": "acknowledged", "version": 1, "source": 6, "read_time": at, "seq_note": i})
	}
	l.add("zhangsan", 1, "signal", ledger.Body{"source": 6, "read_time": at})
	for i := range others {
		l.add("v"+strconv.Itoa(i), uint32(500+i), "signal", ledger.Body{"source": 1, "read_time": at})
	}
	return l
}

// proofRecord is zhangsan's record over l, with its entries and proofs.
func proofRecord(t *testing.T, l *fakeLedger) (*Service, Record) {
	t.Helper()
	s := &Service{ledger: l, zone: time.UTC}
	rec := Record{CorpID: corp, MsgID: "msg1", Title: "考勤制度", Person: Person{UID: 1, UserID: "zhangsan", Name: "张三"}, LedgerConnected: true,
		GeneratedAt: time.Date(2026, 12, 4, 1, 0, 0, 0, time.UTC)}
	testenv.Check(t, "ledgerEntries", s.ledgerEntries(context.Background(), &rec))
	return s, rec
}

// writePDF writes rec's PDF to a temporary file and returns its name
// and pdftotext -layout's text of it.
func writePDF(t *testing.T, s *Service, rec Record) (string, string) {
	t.Helper()
	pdftotext := testenv.LookPath(t, "pdftotext")
	var buf bytes.Buffer
	testenv.Check(t, "PDF", s.PDF(&buf, rec))
	file := filepath.Join(t.TempDir(), "e.pdf")
	testenv.Check(t, "write", os.WriteFile(file, buf.Bytes(), 0o600))
	out, err := exec.Command(pdftotext, "-layout", file, "-").Output()
	testenv.Check(t, "pdftotext", err)
	return file, string(out)
}

// printed is the proof as the PDF's text shows it.
type printed struct {
	size, index uint64
	root, leaf  []byte
	path        [][]byte
}

var (
	reSize  = regexp.MustCompile(`检查点（已签名）：\S+\s+条目数 (\d+)`)
	reRoot  = regexp.MustCompile(`检查点根哈希：\s*([0-9a-f]{64})`)
	reIndex = regexp.MustCompile(`日志位置（叶序号）(\d+)`)
	reLeaf  = regexp.MustCompile(`叶哈希：\s*([0-9a-f]{64})`)
	reCount = regexp.MustCompile(`审计路径（(\d+) 个兄弟哈希`)
	rePath  = regexp.MustCompile(`(?m)^\s*(\d+)\s+([0-9a-f]{64})\s*$`)
)

// parsePrinted reads the checkpoint, the decisive entry's index and
// leaf hash and its audit path from the PDF's text alone.
func parsePrinted(t *testing.T, text string) printed {
	t.Helper()
	one := func(re *regexp.Regexp) string {
		m := re.FindStringSubmatch(text)
		if m == nil {
			t.Fatalf("the PDF's text has no %v:\n%s", re, text)
		}
		return m[1]
	}
	num := func(re *regexp.Regexp) uint64 {
		n, err := strconv.ParseUint(one(re), 10, 64)
		testenv.Check(t, "number", err)
		return n
	}
	unhex := func(s string) []byte {
		b, err := hex.DecodeString(s)
		testenv.Check(t, "hex", err)
		return b
	}
	p := printed{size: num(reSize), index: num(reIndex), root: unhex(one(reRoot)), leaf: unhex(one(reLeaf))}
	for i, m := range rePath.FindAllStringSubmatch(text, -1) {
		if m[1] != strconv.Itoa(i+1) {
			t.Fatalf("path hash %d is numbered %s:\n%s", i+1, m[1], text)
		}
		p.path = append(p.path, unhex(m[2]))
	}
	if n := num(reCount); n != uint64(len(p.path)) {
		t.Fatalf("the PDF says %d path hashes and prints %d:\n%s", n, len(p.path), text)
	}
	return p
}

func (p printed) verify() error {
	return proof.VerifyInclusion(rfc6962.DefaultHasher, p.index, p.size, p.leaf, p.path, p.root)
}

// TestPDFProofVerifies (issue 48): from the PDF's text alone, the
// decisive entry (zhangsan's acknowledgement, which made them read) is
// proved included in the printed signed checkpoint; a record whose path
// has one hash changed prints a proof that does not verify.
func TestPDFProofVerifies(t *testing.T) {
	l := proofLedger(t, 2, 5)
	s, rec := proofRecord(t, l)
	_, text := writePDF(t, s, rec)
	p := parsePrinted(t, text)
	// The decisive entry is the newest acknowledgement: index others+1+acks.
	ack := l.entries[5+1+2]
	if ack.Kind != "page" || p.index != uint64(ack.Index) || !bytes.Equal(p.leaf, ack.LeafHash[:]) {
		t.Fatalf("printed entry %d leaf %x; want the acknowledgement %d leaf %s", p.index, p.leaf, ack.Index, ack.LeafHash)
	}
	if !strings.Contains(text, "关键条目（阅读页记录）：确认知悉，其确认使其计为已读") {
		t.Errorf("the PDF does not say the entry is the acknowledgement:\n%s", text)
	}
	if p.size != uint64(len(l.leaves)) || len(p.path) < 3 {
		t.Fatalf("printed size %d, path of %d; want %d and a path of 3 or more", p.size, len(p.path), len(l.leaves))
	}
	if err := p.verify(); err != nil {
		t.Fatalf("the printed proof does not verify: %v\n%s", err, text)
	}
	for k := range p.path {
		bad := p
		bad.path = append([][]byte(nil), p.path...)
		bad.path[k] = append([]byte(nil), p.path[k]...)
		bad.path[k][0] ^= 1
		if bad.verify() == nil {
			t.Errorf("path hash %d changed: the proof still verifies", k+1)
		}
	}

	// A record with a changed path prints the change: the proof fails.
	for i, e := range rec.Ledger {
		if e.Index == ack.Index {
			pd := *e.Proof
			pd.Path = append([]string(nil), pd.Path...)
			pd.Path[1] = strings.Repeat("0", 64)
			rec.Ledger[i].Proof = &pd
		}
	}
	_, text = writePDF(t, s, rec)
	if err := parsePrinted(t, text).verify(); err == nil {
		t.Errorf("a PDF of a changed path hash verifies:\n%s", text)
	}
}

// TestPDFProofQR: the PDF holds one image, the QR code of the printed
// proof, of the payload's size; the payload is the printed proof, and
// the image decodes to it with an independent reader (zbarimg).
func TestPDFProofQR(t *testing.T) {
	pdfimages := testenv.LookPath(t, "pdfimages")
	l := proofLedger(t, 1, 3)
	s, rec := proofRecord(t, l)
	file, text := writePDF(t, s, rec)
	p := parsePrinted(t, text)

	e, why, ok := decisive(rec.Ledger)
	if !ok || why != "ack" {
		t.Fatalf("decisive = %+v, %q, %v; want the acknowledgement", e, why, ok)
	}
	pp := &pdfProof{Origin: ledger.Origin("yidu.test", corp), Size: e.Proof.TreeSize, Root: e.Proof.Root, Index: e.Index, Leaf: e.LeafHash, Path: e.Proof.Path}
	lines := []string{ProofPayloadHeader, "yidu.test/" + corp, strconv.FormatUint(p.size, 10), hex.EncodeToString(p.root),
		strconv.FormatUint(p.index, 10), hex.EncodeToString(p.leaf)}
	for _, h := range p.path {
		lines = append(lines, hex.EncodeToString(h))
	}
	want := strings.Join(lines, "\n")
	if got := pp.Payload(); got != want {
		t.Fatalf("payload:\n%s\nwant the printed proof:\n%s", got, want)
	}

	png, err := pp.QR()
	testenv.Check(t, "QR", err)
	cfg, _, err := image.DecodeConfig(bytes.NewReader(png))
	testenv.Check(t, "decode QR", err)
	out, err := exec.Command(pdfimages, "-list", file).Output()
	testenv.Check(t, "pdfimages", err)
	// Two header lines, then one line an image: page num type width height ...
	rows := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(rows) != 3 {
		t.Fatalf("pdfimages -list:\n%s\nwant one image", out)
	}
	f := strings.Fields(rows[2])
	if len(f) < 5 || f[2] != "image" || f[3] != strconv.Itoa(cfg.Width) || f[4] != strconv.Itoa(cfg.Height) {
		t.Errorf("pdfimages -list:\n%s\nwant an image of %dx%d", out, cfg.Width, cfg.Height)
	}

	zbarimg := testenv.LookPath(t, "zbarimg") // .ci/services.sh installs zbar-tools
	dir := t.TempDir()
	testenv.Check(t, "pdfimages -png", exec.Command(pdfimages, "-png", file, filepath.Join(dir, "img")).Run())
	got, err := exec.Command(zbarimg, "--raw", "-q", filepath.Join(dir, "img-000.png")).Output()
	testenv.Check(t, "zbarimg", err)
	if strings.TrimRight(string(got), "\n") != want {
		t.Errorf("the QR code reads:\n%s\nwant the printed proof:\n%s", got, want)
	}
}

// TestPDFProofWhenFull: a member with more entries and signals than a
// page holds still gets the checkpoint, the decisive entry's proof (it
// verifies from the text), the QR code and the closing note on one page;
// their other lines are left out and counted.
func TestPDFProofWhenFull(t *testing.T) {
	l := proofLedger(t, 60, 300)
	s, rec := proofRecord(t, l)
	at := time.Date(2026, 12, 3, 2, 0, 0, 0, time.UTC)
	for i := range 60 {
		rec.Signals = append(rec.Signals, Signal{Kind: "acknowledged", At: at.Add(time.Duration(i) * time.Minute), Version: 1,
			Source: "page", ClientIP: "203.0.113.9", UserAgent: "Mozilla/5.0 (iPhone; CPU iPhone OS 17_5 like Mac OS X) wxwork/4.1.22"})
	}
	file, text := writePDF(t, s, rec)
	p := parsePrinted(t, text)
	if len(p.path) < 9 {
		t.Errorf("path of %d hashes; want 9 or more (a tree of %d)", len(p.path), len(l.leaves))
	}
	if err := p.verify(); err != nil {
		t.Errorf("the printed proof does not verify: %v\n%s", err, text)
	}
	for _, w := range []string{"yidu.test/" + corp, "yidu evidence check", "未能印在本页", "张三"} {
		if !strings.Contains(text, w) {
			t.Errorf("pdftotext lacks %q:\n%s", w, text)
		}
	}
	if n := strings.Count(text, "\f"); n != 1 {
		t.Errorf("PDF has %d pages; want 1", n)
	}
	out, err := exec.Command(testenv.LookPath(t, "pdfimages"), "-list", file).Output()
	testenv.Check(t, "pdfimages", err)
	if n := len(strings.Split(strings.TrimSpace(string(out)), "\n")); n != 3 {
		t.Errorf("pdfimages -list:\n%s\nwant one image", out)
	}
}

// TestDecisiveEntry: the entry a panel asks about is the acknowledgement
// that made the member read, else the read, else an acknowledgement,
// else the first delivered send, else the newest send or reminder;
// entries without a proof are passed over.
func TestDecisiveEntry(t *testing.T) {
	pf := &ProofDoc{}
	send := Entry{Index: 1, Kind: "send", Body: `{"errcode":0}`, Proof: pf}
	failed := Entry{Index: 2, Kind: "send", Body: `{"errcode":81013}`, Proof: pf}
	rem := Entry{Index: 3, Kind: "reminder", Body: `{"errcode":0}`, Proof: pf}
	ack := Entry{Index: 4, Kind: "page", Body: `{"signal":"acknowledged"}`, Proof: pf}
	end := Entry{Index: 5, Kind: "page", Body: `{"signal":"read_to_end"}`, Proof: pf}
	byAck := Entry{Index: 6, Kind: "signal", Body: `{"source":6}`, Proof: pf}
	byButton := Entry{Index: 7, Kind: "signal", Body: `{"source":1}`, Proof: pf}
	unproved := Entry{Index: 8, Kind: "signal", Body: `{"source":1}`}
	tests := []struct {
		name string
		es   []Entry
		want int64
		why  string
	}{
		{"acknowledged read", []Entry{send, ack, end, byAck}, 4, "ack"},
		{"read by the card", []Entry{send, ack, byButton}, 7, "read"},
		{"acknowledged, not read", []Entry{send, end, ack}, 4, "ack_only"},
		{"delivered", []Entry{failed, send, rem, end}, 1, "sent"},
		{"not delivered", []Entry{failed, rem}, 3, "tried"},
		{"unproved read", []Entry{send, unproved}, 1, "sent"},
		{"nothing", []Entry{unproved, {Kind: "version", Proof: pf}}, -1, ""},
	}
	for _, tt := range tests {
		e, why, ok := decisive(tt.es)
		if !ok {
			e.Index = -1
		}
		if e.Index != tt.want || why != tt.why {
			t.Errorf("%s: decisive = %d %q; want %d %q", tt.name, e.Index, why, tt.want, tt.why)
		}
	}
}
