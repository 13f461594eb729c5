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
	q := `SELECT r.uid, u.userid, r.is_read FROM message_read_record r
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
		if err := rows.Scan(&mb.UID, &mb.UserID, &mb.Read); err != nil {
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

func personFile(userid, name string) string { return userid + "/" + name }

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
	var manifest bytes.Buffer
	cw := csv.NewWriter(&manifest)
	_ = cw.Write(manifestHeader)
	roots := map[string]string{}
	var buf bytes.Buffer
	n := 0
	for _, p := range sel.People {
		if err := ctx.Err(); err != nil {
			return n, err
		}
		row := s.db.QueryRowContext(ctx, `SELECT `+memberColumns+` FROM users u
			JOIN message_read_record r ON r.corp_id = u.corp_id AND r.uid = u.uid AND r.msgid = ?
			WHERE u.corp_id = ? AND u.uid = ?`, sel.msgid, sel.corp, p.UID)
		mem, err := scanMember(row)
		if err != nil {
			return n, fmt.Errorf("evidence: member %d of %s: %w", p.UID, sel.msgid, err)
		}
		rec, err := s.build(ctx, sel.corp, sel.msgid, sel.msg, mem, versions, names)
		if err != nil {
			return n, err
		}
		buf.Reset()
		if err := s.PDF(&buf, rec); err != nil {
			return n, err
		}
		pdfSum, err := store(zw, personFile(rec.Person.UserID, pdfName), buf.Bytes(), rec.GeneratedAt)
		if err != nil {
			return n, err
		}
		pf := ProofsFile{CorpID: rec.CorpID, MsgID: rec.MsgID, UserID: rec.Person.UserID, LedgerConnected: rec.LedgerConnected,
			Roots: rec.Roots, Entries: rec.Ledger}
		if pf.Entries == nil {
			pf.Entries = []Entry{}
		}
		pj, _ := json.MarshalIndent(pf, "", "  ")
		proofSum, err := store(zw, personFile(rec.Person.UserID, "proofs.json"), pj, rec.GeneratedAt)
		if err != nil {
			return n, err
		}
		rj, _ := json.MarshalIndent(rec, "", "  ")
		recSum, err := store(zw, personFile(rec.Person.UserID, "record.json"), rj, rec.GeneratedAt)
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
			personFile(rec.Person.UserID, pdfName), pdfSum, personFile(rec.Person.UserID, "proofs.json"), proofSum,
			personFile(rec.Person.UserID, "record.json"), recSum})
		n++
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
