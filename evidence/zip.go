package evidence

import (
	"archive/zip"
	"bytes"
	"context"
	"crypto/sha256"
	_ "embed"
	"encoding/csv"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"golang.org/x/mod/sumdb/note"

	"github.com/RoaringBitmap/roaring/v2"
	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/idmap"
	"github.com/yidu-io/yidu/notice"
)

// Filter narrows a ZIP to a department's people (with its sub-departments)
// and to read or unread.
type Filter struct {
	Department    int64
	HasDepartment bool
	// State is "read", "unread" or "" (everyone).
	State string
}

// Member is one person a ZIP will hold.
type Member struct {
	UID    uint32
	UserID string
	Name   string
	Read   bool
}

// Selection is the people of one ZIP, chosen by Select.
type Selection struct {
	corp, msgid string
	msg         message
	// visible are the departments the caller sees (nil: all).
	visible map[int64]bool
	People  []Member
}

// Select returns the recipients of corp's msgid that scope reaches and f
// keeps, in uid order. Unknown notice: ErrNotFound; an unknown
// department is an empty selection.
func (s *Service) Select(ctx context.Context, scope Scope, corp, msgid string, f Filter) (Selection, error) {
	m, err := s.message(ctx, corp, msgid)
	if err != nil {
		return Selection{}, err
	}
	sel := Selection{corp: corp, msgid: msgid, msg: m}
	if scope != nil {
		if sel.visible, err = s.visibleDepartments(ctx, corp, scope); err != nil {
			return Selection{}, err
		}
	}
	var inDept *roaring.Bitmap
	if f.HasDepartment {
		if inDept, err = s.departmentMembers(ctx, corp, f.Department); err != nil {
			return Selection{}, err
		}
	}
	q := `SELECT r.uid, u.userid, u.name, r.is_read FROM message_read_record r
		JOIN users u ON u.corp_id = r.corp_id AND u.uid = r.uid
		WHERE r.corp_id = ? AND r.msgid = ?`
	switch f.State {
	case "read":
		q += " AND r.is_read = 1"
	case "unread":
		q += " AND r.is_read = 0"
	}
	rows, err := s.db.QueryContext(ctx, q+" ORDER BY r.uid", corp, msgid)
	if err != nil {
		return Selection{}, fmt.Errorf("evidence: recipients of %s: %w", msgid, err)
	}
	defer rows.Close()
	for rows.Next() {
		var mb Member
		if err := rows.Scan(&mb.UID, &mb.UserID, &mb.Name, &mb.Read); err != nil {
			return Selection{}, fmt.Errorf("evidence: recipients of %s: %w", msgid, err)
		}
		if scope == nil || !scope.Contains(mb.UID) || (inDept != nil && !inDept.Contains(mb.UID)) {
			continue
		}
		sel.People = append(sel.People, mb)
	}
	if err := rows.Err(); err != nil {
		return Selection{}, fmt.Errorf("evidence: recipients of %s: %w", msgid, err)
	}
	return sel, nil
}

// departmentMembers are the members of dept and its sub-departments,
// read through idmap (which owns the directory).
func (s *Service) departmentMembers(ctx context.Context, corp string, dept int64) (*roaring.Bitmap, error) {
	org, err := idmap.Tree(ctx, s.db, corp)
	if err != nil {
		return nil, fmt.Errorf("evidence: departments: %w", err)
	}
	members, err := idmap.InDepartments(ctx, s.db, corp, org.Subtree(dept))
	if err != nil {
		return nil, fmt.Errorf("evidence: members of department %d: %w", dept, err)
	}
	return members, nil
}

// verifyHTML is the pack's offline verifier: one HTML file that checks
// the pack in a browser (WebCrypto), with no yidu binary.
//
//go:embed verify.html
var verifyHTML []byte

// The ZIP's layout (docs/evidence-records.md).
const (
	zipManifest    = "manifest.csv"
	zipManifestSig = "manifest.sig"
	zipCheckpoint  = "checkpoint.txt"
	zipKey         = "key.txt"
	zipReadme      = "README.txt"
	zipVerifier    = "verify.html"
	pdfName        = "告知确认书.pdf"
)

func personFile(dir, name string) string { return dir + "/" + name }

// personDir is the person's directory in the ZIP: their UserID, or
// uid-N for a UserID that breaks WeCom's rule (kept in the directory so
// their reads count; it might hold "/" or ".."), so no path in the ZIP
// leaves it when unpacked.
func personDir(p Person) string {
	if yidu.UserID(p.UserID).Valid() {
		return p.UserID
	}
	return fmt.Sprintf("uid-%d", p.UID)
}

// manifestHeader is manifest.csv's first line.
var manifestHeader = []string{"userid", "name", "state", "read_time", "pdf", "pdf_sha256", "proofs", "proofs_sha256", "record", "record_sha256"}

// ProofsFile is a person's proofs.json in the ZIP: their entries with
// canonical bodies and inclusion proofs, and the signed checkpoint.
type ProofsFile struct {
	CorpID          string  `json:"corp_id"`
	MsgID           string  `json:"msgid"`
	UserID          string  `json:"userid"`
	UID             uint32  `json:"uid"`
	LedgerConnected bool    `json:"ledger_connected"`
	Checkpoint      string  `json:"checkpoint,omitempty"`
	Entries         []Entry `json:"entries"`
}

// WriteZIP streams sel's evidence to w as a ZIP: per person their PDF,
// proofs.json and record.json, then manifest.csv (each file's SHA-256),
// manifest.sig (the log key's signature over the manifest), the signed
// checkpoint the proofs lead to (checkpoint.txt, taken first), the log's
// public key (key.txt) and the README. Only one person's files are in
// memory at a time. It returns how many people it wrote; an error midway
// leaves a ZIP without its central directory, which no reader accepts.
func (s *Service) WriteZIP(ctx context.Context, w io.Writer, sel Selection) (int, error) {
	var checkpoint string
	if s.ledger != nil {
		var err error
		if checkpoint, err = s.ledger.Checkpoint(ctx, sel.corp); err != nil {
			return 0, fmt.Errorf("evidence: checkpoint: %w", err)
		}
	}
	zw := zip.NewWriter(w)
	versions, err := s.versions.List(ctx, sel.corp, sel.msgid)
	if err != nil && !errors.Is(err, notice.ErrNotFound) {
		return 0, fmt.Errorf("evidence: versions of %s: %w", sel.msgid, err)
	}
	names, err := s.departmentNames(ctx, sel.corp)
	if err != nil {
		return 0, err
	}
	fc := newFontCache(fontSeed(sel, versions, names)...)
	var manifest bytes.Buffer
	cw := csv.NewWriter(&manifest)
	_ = cw.Write(manifestHeader)
	n := 0
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for ch := range s.people(ctx, sel, versions, names, fc) {
		r := <-ch
		if r.err != nil {
			return n, r.err
		}
		row, err := storePerson(zw, r)
		if err != nil {
			return n, err
		}
		_ = cw.Write(row)
		n++
	}
	if err := ctx.Err(); err != nil {
		return n, err
	}
	cw.Flush()
	if err := s.storePack(zw, sel, manifest.Bytes(), checkpoint); err != nil {
		return n, err
	}
	if err := zw.Close(); err != nil {
		return n, fmt.Errorf("evidence: zip: %w", err)
	}
	return n, nil
}

// personFiles are one person's files in the ZIP, made by a worker.
type personFiles struct {
	rec                 Record
	pdf, proofs, record []byte
	err                 error
}

// fontSeed is what the ZIP's one font must cover: the template's words,
// the notice's titles, the departments' and the people's names.
func fontSeed(sel Selection, versions []notice.Version, names map[int64]string) []string {
	seed := []string{sel.msg.title, sel.corp, sel.msgid}
	for _, v := range versions {
		seed = append(seed, v.Title)
	}
	for _, n := range names {
		seed = append(seed, n)
	}
	for _, p := range sel.People {
		seed = append(seed, p.Name, p.UserID)
	}
	return seed
}

// storePerson writes a person's three files into their directory and
// returns their manifest row.
func storePerson(zw *zip.Writer, r personFiles) ([]string, error) {
	rec := r.rec
	dir := personDir(rec.Person)
	pdfSum, err := store(zw, personFile(dir, pdfName), r.pdf, rec.GeneratedAt)
	if err != nil {
		return nil, err
	}
	proofSum, err := store(zw, personFile(dir, "proofs.json"), r.proofs, rec.GeneratedAt)
	if err != nil {
		return nil, err
	}
	recSum, err := store(zw, personFile(dir, "record.json"), r.record, rec.GeneratedAt)
	if err != nil {
		return nil, err
	}
	state, readTime := "unread", ""
	if rec.Read {
		state = "read"
		if rec.ReadTime != nil {
			readTime = rec.ReadTime.Format(time.RFC3339)
		}
	}
	// Names are people's text: a spreadsheet must not run them
	// (the rule export.csv keeps).
	return []string{yidu.CSVCell(rec.Person.UserID), yidu.CSVCell(rec.Person.Name), state, readTime,
		personFile(dir, pdfName), pdfSum, personFile(dir, "proofs.json"), proofSum,
		personFile(dir, "record.json"), recSum}, nil
}

// storePack writes the pack's own files: the manifest, its signature,
// the checkpoint, the log's key, the README and the verifier page.
func (s *Service) storePack(zw *zip.Writer, sel Selection, manifest []byte, checkpoint string) error {
	now := s.now().UTC()
	if _, err := store(zw, zipManifest, manifest, now); err != nil {
		return err
	}
	if s.signer != nil {
		sig, err := note.Sign(&note.Note{Text: manifestNoteText(sel.corp, sel.msgid, manifest)}, s.signer)
		if err != nil {
			return fmt.Errorf("evidence: sign manifest: %w", err)
		}
		if _, err := store(zw, zipManifestSig, sig, now); err != nil {
			return err
		}
	}
	if checkpoint != "" {
		if _, err := store(zw, zipCheckpoint, []byte(checkpoint), now); err != nil {
			return err
		}
	}
	if s.vkey != "" {
		if _, err := store(zw, zipKey, []byte(s.vkey+"\n"), now); err != nil {
			return err
		}
	}
	if _, err := store(zw, zipReadme, []byte(readme), now); err != nil {
		return err
	}
	if _, err := store(zw, zipVerifier, verifyHTML, now); err != nil {
		return err
	}
	return nil
}

// people makes each person's files on s.workers goroutines and hands
// them over in sel's order: a channel of one-result channels, at most
// 2*s.workers ahead of the writer, so memory holds a few people's files
// and never the ZIP. The database round trips of one person overlap
// another's PDF. Cancel ctx to stop it early.
func (s *Service) people(ctx context.Context, sel Selection, versions []notice.Version, names map[int64]string, fc *fontCache) <-chan chan personFiles {
	out := make(chan chan personFiles, 2*s.workers)
	go func() {
		defer close(out)
		sem := make(chan struct{}, s.workers)
		for _, p := range sel.People {
			ch := make(chan personFiles, 1)
			select {
			case out <- ch:
			case <-ctx.Done():
				return
			}
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				ch <- personFiles{err: ctx.Err()}
				return
			}
			go func() {
				defer func() { <-sem }()
				ch <- s.personFiles(ctx, sel, p, versions, names, fc)
			}()
		}
	}()
	return out
}

func (s *Service) personFiles(ctx context.Context, sel Selection, p Member, versions []notice.Version, names map[int64]string, fc *fontCache) personFiles {
	row := s.db.QueryRowContext(ctx, `SELECT `+memberColumns+` FROM users u
		JOIN message_read_record r ON r.corp_id = u.corp_id AND r.uid = u.uid AND r.msgid = ?
		WHERE u.corp_id = ? AND u.uid = ?`, sel.msgid, sel.corp, p.UID)
	mem, err := scanMember(row)
	if err != nil {
		return personFiles{err: fmt.Errorf("evidence: member %d of %s: %w", p.UID, sel.msgid, err)}
	}
	rec, err := s.build(ctx, sel.corp, sel.msgid, sel.msg, mem, versions, names)
	if err != nil {
		return personFiles{err: err}
	}
	cutDepartments(&rec, sel.visible)
	var buf bytes.Buffer
	if err := s.pdf(&buf, rec, fc); err != nil {
		return personFiles{err: err}
	}
	pf := ProofsFile{CorpID: rec.CorpID, MsgID: rec.MsgID, UserID: rec.Person.UserID, UID: rec.Person.UID, LedgerConnected: rec.LedgerConnected,
		Checkpoint: rec.Checkpoint, Entries: rec.Ledger}
	if pf.Entries == nil {
		pf.Entries = []Entry{}
	}
	pj, err := json.MarshalIndent(pf, "", "  ")
	if err != nil {
		return personFiles{err: fmt.Errorf("evidence: proofs: %w", err)}
	}
	rj, err := json.Marshal(rec)
	if err != nil {
		return personFiles{err: fmt.Errorf("evidence: record: %w", err)}
	}
	return personFiles{rec: rec, pdf: buf.Bytes(), proofs: pj, record: rj}
}

// store writes one file into zw and returns its SHA-256 in hex.
func store(zw *zip.Writer, name string, b []byte, at time.Time) (string, error) {
	f, err := zw.CreateHeader(&zip.FileHeader{Name: name, Method: zip.Deflate, Modified: at})
	if err != nil {
		return "", fmt.Errorf("evidence: zip %s: %w", name, err)
	}
	if _, err := f.Write(b); err != nil {
		return "", fmt.Errorf("evidence: zip %s: %w", name, err)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]), nil
}

const readme = `yidu 证据包

一、内容
每位接收人一个目录（以其 UserID 命名，UserID 不合规时为 uid-N）：
  告知确认书.pdf  一页告知确认书；印有关键条目的包含证明及其二维码（第 8 步）
  record.json     完整记录（JSON）：送达、版本、阅读与确认、提醒
  proofs.json     其存证账本条目：每条的规范正文（body）、叶哈希、
                  包含证明（path）与签名检查点（checkpoint）
manifest.csv    每个文件的 SHA-256
manifest.sig    存证账本密钥对 manifest.csv 的签名（签名文本，Ed25519）
checkpoint.txt  导出时账本的签名检查点（C2SP tlog-checkpoint：来源、条目数、根哈希）
key.txt         账本的公钥（验证密钥）。请与 yidu 运营方另行公布的公钥比对，
                不要只信任包内这一份。
verify.html     离线核验页：用浏览器打开，选择本 ZIP、填入公钥，即按下列步骤核验
                （不联网，无需 yidu；第 6 步的时间戳令牌须用 openssl 核验）。

二、核验步骤（无需 yidu，也可用 yidu evidence check 本文件.zip --key 公钥）
1. 用账本公钥核验 manifest.sig（golang.org/x/mod/sumdb/note 的签名文本格式），
   签名文本第 4 行应等于 manifest.csv 的 SHA-256（sha256sum manifest.csv）。
2. manifest.csv 中每个文件的 SHA-256 与文件一致（sha256sum）。
3. 用同一公钥核验 checkpoint.txt 与每条证明中的 checkpoint 签名；
   检查点第 2 行为条目数，第 3 行为根哈希（base64）。
4. proofs.json 中每个条目：叶哈希 = SHA-256(0x00 || body)；
   按 RFC 6962 / RFC 9162 2.1.3.2 由叶哈希沿 path 计算，节点为
   SHA-256(0x01 || 左 || 右)，得到的根等于检查点的根（条目位置 index = 序号 - 1）。
5. 每个条目的 body 中 corp、msgid、uid、userid 须为本目录的接收人；
   record.json 中的每项事实（已读时间、每批送达、每个版本的 sha256、
   每个阅读与确认信号）都须有一个这样的条目。
6. record.json 中有 day_checkpoint（覆盖本人条目的日检查点及其可信时间戳）时：
   其 checkpoint 字段（签名检查点原文）用同一公钥核验，条目数、根哈希与
   size、root 一致，且不小于本人每个条目的序号；其 consistency 为一致性证明
   （RFC 6962 / RFC 9162 2.1.4.2），证明该日检查点的树是本人最新条目的证明所依
   检查点（tree_size）之树的前缀；tsa_token 为 RFC 3161
   时间戳令牌（DER 的 base64），其消息摘要为该签名检查点原文的 SHA-256
   （注意：是 day_checkpoint.checkpoint，不是 checkpoint.txt）。用 openssl 核验：
     jq -j .day_checkpoint.checkpoint record.json > day-checkpoint.txt
     jq -r .day_checkpoint.tsa_token record.json | base64 -d > token.der
     openssl ts -verify -data day-checkpoint.txt -in token.der -token_in -CAfile 时间戳机构的CA证书.pem
   应输出 Verification: OK；令牌中的时间（openssl ts -reply -in token.der
   -token_in -text 所列 Time stamp）应等于 tsa_time。
7. 可再向运营方索取更新的检查点及一致性证明，证明账本此后只增不改：
   yidu evidence consistency --corp 企业ID --from 本包条目数 > 一致性.json
   yidu evidence check 本文件.zip --key 公钥 --checkpoint 一致性.json
8. 只有告知确认书时：其“七、防篡改账本”印有检查点的来源、条目数与根哈希，
   关键条目（使本人计入的确认或阅读；无则送达）的日志位置（叶序号 index）、
   叶哈希与审计路径（自叶向根的兄弟哈希，hex），按第 4 步由叶哈希沿路径
   计算应得该根哈希。右侧二维码载有同一证明，文本逐行为：yidu-proof/1、
   来源、条目数、根哈希、index、叶哈希、路径哈希（各一行，hex 小写）。

Evidence pack. Check with the log's public key obtained outside the pack:
manifest.sig signs manifest.csv's SHA-256; every file matches the
manifest; every entry's body hashes to its leaf (SHA-256(0x00||body)),
names the person of its folder, and its RFC 6962 inclusion proof leads to
the root of a checkpoint signed with that key; every fact record.json
states is one of those entries. A record's day_checkpoint carries a
consistency proof to the checkpoint its newest entry is proved against,
and an RFC 3161 token over the SHA-256 of its signed checkpoint (its
"checkpoint" field, not checkpoint.txt): openssl ts -verify -data
day-checkpoint.txt -in token.der -token_in -CAfile TSA-CA.pem. yidu
evidence check FILE.zip --key KEY does all of it; --checkpoint FILE (what
yidu evidence consistency prints) checks the log only grew since.
Each PDF prints its decisive entry's index, leaf hash and audit path
against the signed checkpoint it shows, and a QR code of the same proof
(lines: yidu-proof/1, origin, size, root, index, leaf, path hashes; hex).
`
