package evidence

import (
	"archive/zip"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/csv"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/yidu-io/yidu"
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
	People      []Member
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
	var inDept map[uint32]bool
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
		if scope == nil || !scope.Contains(mb.UID) || (inDept != nil && !inDept[mb.UID]) {
			continue
		}
		sel.People = append(sel.People, mb)
	}
	if err := rows.Err(); err != nil {
		return Selection{}, fmt.Errorf("evidence: recipients of %s: %w", msgid, err)
	}
	return sel, nil
}

// departmentMembers are the members of dept and its sub-departments.
func (s *Service) departmentMembers(ctx context.Context, corp string, dept int64) (map[uint32]bool, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT dept_id, parent_id FROM departments WHERE corp_id = ?`, corp)
	if err != nil {
		return nil, fmt.Errorf("evidence: departments: %w", err)
	}
	children := map[int64][]int64{}
	for rows.Next() {
		var id, parent int64
		if err := rows.Scan(&id, &parent); err != nil {
			rows.Close()
			return nil, fmt.Errorf("evidence: departments: %w", err)
		}
		if id != parent {
			children[parent] = append(children[parent], id)
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("evidence: departments: %w", err)
	}
	out := map[uint32]bool{}
	seen := map[int64]bool{}
	todo := []int64{dept}
	for len(todo) > 0 {
		d := todo[len(todo)-1]
		todo = todo[:len(todo)-1]
		if seen[d] {
			continue
		}
		seen[d] = true
		todo = append(todo, children[d]...)
		urows, err := s.db.QueryContext(ctx, `SELECT uid FROM user_departments WHERE corp_id = ? AND dept_id = ?`, corp, d)
		if err != nil {
			return nil, fmt.Errorf("evidence: members of department %d: %w", d, err)
		}
		for urows.Next() {
			var uid uint32
			if err := urows.Scan(&uid); err != nil {
				urows.Close()
				return nil, fmt.Errorf("evidence: members of department %d: %w", d, err)
			}
			out[uid] = true
		}
		urows.Close()
		if err := urows.Err(); err != nil {
			return nil, fmt.Errorf("evidence: members of department %d: %w", d, err)
		}
	}
	return out, nil
}

// The ZIP's layout (docs/evidence-records.md).
const (
	zipManifest = "manifest.csv"
	zipRoots    = "roots.json"
	zipReadme   = "README.txt"
	pdfName     = "告知确认书.pdf"
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

// ProofsFile is a person's proofs.json in the ZIP.
type ProofsFile struct {
	CorpID          string            `json:"corp_id"`
	MsgID           string            `json:"msgid"`
	UserID          string            `json:"userid"`
	LedgerConnected bool              `json:"ledger_connected"`
	Roots           map[string]string `json:"roots"`
	Entries         []Entry           `json:"entries"`
}

// WriteZIP streams sel's evidence to w as a ZIP: per person their PDF,
// proofs.json and record.json, then manifest.csv (each file's SHA-256)
// and roots.json (every day's root). Only one person's files are in
// memory at a time. It returns how many people it wrote; an error midway
// leaves a ZIP without its central directory, which no reader accepts.
func (s *Service) WriteZIP(ctx context.Context, w io.Writer, sel Selection) (int, error) {
	zw := zip.NewWriter(w)
	versions, err := s.versions.List(ctx, sel.corp, sel.msgid)
	if err != nil && !errors.Is(err, notice.ErrNotFound) {
		return 0, fmt.Errorf("evidence: versions of %s: %w", sel.msgid, err)
	}
	names, err := s.departmentNames(ctx, sel.corp)
	if err != nil {
		return 0, err
	}
	// One font for the ZIP: the template's words, the notice's titles,
	// the departments' and the people's names.
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
	fc := newFontCache(seed...)
	var manifest bytes.Buffer
	cw := csv.NewWriter(&manifest)
	_ = cw.Write(manifestHeader)
	roots := map[string]string{}
	n := 0
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for ch := range s.people(ctx, sel, versions, names, fc) {
		r := <-ch
		if r.err != nil {
			return n, r.err
		}
		rec := r.rec
		dir := personDir(rec.Person)
		pdfSum, err := store(zw, personFile(dir, pdfName), r.pdf, rec.GeneratedAt)
		if err != nil {
			return n, err
		}
		proofSum, err := store(zw, personFile(dir, "proofs.json"), r.proofs, rec.GeneratedAt)
		if err != nil {
			return n, err
		}
		recSum, err := store(zw, personFile(dir, "record.json"), r.record, rec.GeneratedAt)
		if err != nil {
			return n, err
		}
		for d, r := range rec.Roots {
			roots[d] = r
		}
		state, readTime := "unread", ""
		if rec.Read {
			state = "read"
			if rec.ReadTime != nil {
				readTime = rec.ReadTime.Format(time.RFC3339)
			}
		}
		_ = cw.Write([]string{rec.Person.UserID, rec.Person.Name, state, readTime,
			personFile(dir, pdfName), pdfSum, personFile(dir, "proofs.json"), proofSum,
			personFile(dir, "record.json"), recSum})
		n++
	}
	if err := ctx.Err(); err != nil {
		return n, err
	}
	cw.Flush()
	now := s.now().UTC()
	if _, err := store(zw, zipManifest, manifest.Bytes(), now); err != nil {
		return n, err
	}
	rj, _ := json.MarshalIndent(roots, "", "  ")
	if _, err := store(zw, zipRoots, rj, now); err != nil {
		return n, err
	}
	if _, err := store(zw, zipReadme, []byte(readme), now); err != nil {
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
	var buf bytes.Buffer
	if err := s.pdf(&buf, rec, fc); err != nil {
		return personFiles{err: err}
	}
	pf := ProofsFile{CorpID: rec.CorpID, MsgID: rec.MsgID, UserID: rec.Person.UserID, LedgerConnected: rec.LedgerConnected,
		Roots: rec.Roots, Entries: rec.Ledger}
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

const readme = `yidu 证据包 / evidence pack

每位接收人一个目录（以其 UserID 命名）：
  告知确认书.pdf  一页告知确认书
  record.json     完整记录（JSON）
  proofs.json     其账本条目与 RFC 6962 包含证明
manifest.csv 列出每个文件的 SHA-256；roots.json 列出每日的账本根哈希。

核验：yidu evidence check 本文件.zip
或按 docs/evidence-records.md 自行核验：
  1. 每个文件的 SHA-256 与 manifest.csv 一致；
  2. proofs.json 中每个条目：由 leaf_hash 沿 path 计算
     （node = SHA-256(0x01 || 左 || 右)，RFC 6962）得到的根，
     等于该日的 root，且与 roots.json、审计日志中公布的该日根一致。

Check: every file's SHA-256 matches manifest.csv; every proof in
proofs.json leads from leaf_hash to its day's root (RFC 6962 inclusion),
and that root matches roots.json and the root published in the audit log.
`
