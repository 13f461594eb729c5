package evidence

import (
	"archive/zip"
	"bytes"
	"crypto/sha256"
	"crypto/x509"
	"encoding/csv"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/transparency-dev/formats/log"
	"github.com/transparency-dev/merkle/proof"
	"github.com/transparency-dev/merkle/rfc6962"
	"golang.org/x/mod/sumdb/note"
)

// maxCheckedFile bounds one file Check reads from a ZIP (a PDF is tens of
// kB): a hostile ZIP cannot make it inflate gigabytes.
const maxCheckedFile = 64 << 20

// ErrCheck: the ZIP does not hold up; CheckReport.Problems says where.
var ErrCheck = errors.New("evidence: check failed")

// CheckOptions say what Check trusts beyond the ZIP.
type CheckOptions struct {
	// Key is the log's verifier key (name+hash+…, as `yidu evidence key`
	// prints it), obtained outside the pack. "": the key the pack names
	// (key.txt), which the report says: whoever made the pack could have
	// put their own there.
	Key string
	// Newer is a signed checkpoint of the same log newer than the pack's
	// and Consistency the proof (hex hashes, `yidu evidence consistency`)
	// that the pack's checkpoint is a prefix of it: the log only grew
	// since the pack was made. Check then relies on Newer.
	Newer       string
	Consistency []string
	// TSARoots: each record's day checkpoint's TSA token must chain to
	// one of these (the TSA's CA, obtained outside the pack); nil: its
	// signature is checked with the certificate the token carries, and
	// the report says that certificate was not checked against a root.
	TSARoots *x509.CertPool
}

// StampChecked is a day checkpoint whose RFC 3161 token Check verified:
// the day, the checkpoint's size, the TSA's time relied on, the TSA
// (its certificate's subject) and whether that certificate chained to
// CheckOptions.TSARoots.
type StampChecked struct {
	Day         string
	Size        int64
	Time        time.Time
	TSA         string
	RootChecked bool
}

// CheckReport is what Check found.
type CheckReport struct {
	People int
	// Files: files whose SHA-256 matched the manifest; Proofs: entries
	// whose body, inclusion proof and signed checkpoint verified; Facts:
	// facts of the records found among their person's proved entries.
	Files, Proofs, Facts int
	// LedgerConnected: at least one person's proofs.json came from a
	// connected ledger.
	LedgerConnected bool
	// Key names the verifier key used; KeyFromPack: it was the pack's own.
	Key         string
	KeyFromPack bool
	// Origin, Size and Root are the checkpoint Check relied on (the
	// pack's, or Newer once consistent with it).
	Origin string
	Size   uint64
	Root   string
	// ManifestSigned: manifest.csv's signature verified.
	ManifestSigned bool
	// Stamps: the day checkpoints whose TSA tokens verified, once each.
	Stamps   []StampChecked
	Problems []string
}

// Check verifies an evidence ZIP offline, trusting nothing in it but what
// the log's key signed: manifest.sig is that key's signature over
// manifest.csv's SHA-256, and every file listed has its SHA-256; each
// entry of each proofs.json hashes (its canonical body) to its leaf,
// names the person of the folder, and is included (RFC 6962, by
// transparency-dev/merkle's verifier) in a checkpoint the key signed;
// each fact record.json states (the read, each delivery, each version,
// each signal) is one of those entries' for that person. It returns
// ErrCheck when anything fails, with every problem in the report.
func Check(r io.ReaderAt, size int64, opts CheckOptions) (CheckReport, error) {
	zr, err := zip.NewReader(r, size)
	if err != nil {
		return CheckReport{}, fmt.Errorf("evidence: not a zip: %w", err)
	}
	c := &checker{opts: opts, files: map[string]*zip.File{}}
	for _, f := range zr.File {
		if _, dup := c.files[f.Name]; dup {
			c.problem("%s: twice in the zip", f.Name)
		}
		c.files[f.Name] = f
	}
	v, ok := c.logKey()
	if !ok {
		return c.fail()
	}
	mb, rows, ok := c.manifest()
	if !ok {
		return c.fail()
	}
	corp, msgid := c.manifestSignature(v, mb)
	cp := c.checkpoint(v)
	if opts.Newer != "" && v != nil && c.rep.Origin != "" {
		c.newerCheckpoint(v, cp)
	}
	listed := c.people(rows, corp, msgid, v)
	for name := range c.files {
		if !listed[name] && !strings.HasSuffix(name, "/") {
			c.problem("%s: not in the manifest", name)
		}
	}
	if len(c.rep.Problems) > 0 {
		return c.rep, fmt.Errorf("%w: %d problems", ErrCheck, len(c.rep.Problems))
	}
	return c.rep, nil
}

// checker is one run of Check: the pack's files by name and what it
// found so far.
type checker struct {
	opts  CheckOptions
	files map[string]*zip.File
	rep   CheckReport
}

func (c *checker) problem(format string, a ...any) {
	c.rep.Problems = append(c.rep.Problems, fmt.Sprintf(format, a...))
}

// fail ends a check that cannot go on.
func (c *checker) fail() (CheckReport, error) {
	return c.rep, fmt.Errorf("%w: %s", ErrCheck, strings.Join(c.rep.Problems, "; "))
}

// read returns the pack's file name, up to maxCheckedFile bytes.
func (c *checker) read(name string) ([]byte, error) {
	f, ok := c.files[name]
	if !ok {
		return nil, fmt.Errorf("%s: missing", name)
	}
	rc, err := f.Open()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	defer rc.Close()
	b, err := io.ReadAll(io.LimitReader(rc, maxCheckedFile+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if len(b) > maxCheckedFile {
		return nil, fmt.Errorf("%s: larger than %d bytes", name, maxCheckedFile)
	}
	return b, nil
}

// logKey is the log's verifier: the key given, or else the pack's own
// (nil: neither); ok false when the key is not one.
func (c *checker) logKey() (note.Verifier, bool) {
	key := strings.TrimSpace(c.opts.Key)
	if key == "" {
		if b, err := c.read(zipKey); err == nil {
			key, c.rep.KeyFromPack = strings.TrimSpace(string(b)), true
		}
	}
	if key == "" {
		return nil, true
	}
	v, err := note.NewVerifier(key)
	if err != nil {
		c.problem("the log's key %q: %v", key, err)
		return nil, false
	}
	c.rep.Key = v.Name() + "+" + fmt.Sprintf("%08x", v.KeyHash())
	return v, true
}

// manifest reads manifest.csv: its bytes and its rows, the header first.
func (c *checker) manifest() ([]byte, [][]string, bool) {
	mb, err := c.read(zipManifest)
	if err != nil {
		c.problem("%v", err)
		return nil, nil, false
	}
	rows, err := csv.NewReader(bytes.NewReader(mb)).ReadAll()
	if err != nil || len(rows) == 0 || !slices.Equal(rows[0], manifestHeader) {
		c.problem("%s: not the manifest yidu writes (%v)", zipManifest, err)
		return nil, nil, false
	}
	return mb, rows, true
}

// manifestSignature checks the manifest's signature, and returns the
// corp and notice it names: without it a holder edits a file and
// rehashes it in the manifest.
func (c *checker) manifestSignature(v note.Verifier, mb []byte) (corp, msgid string) {
	if v == nil {
		c.problem("%s: no key of the log to check its signature with", zipManifestSig)
	} else if sig, err := c.read(zipManifestSig); err != nil {
		c.problem("%v", err)
	} else if n, err := note.Open(sig, note.VerifierList(v)); err != nil {
		c.problem("%s: not signed by the log's key %s: %v", zipManifestSig, c.rep.Key, err)
	} else if co, m, sum, ok := parseManifestNote(n.Text); !ok || sum != sha256Hex(mb) {
		c.problem("%s: the signed manifest has SHA-256 %s; %s has %s (it was changed after signing)", zipManifestSig, sum, zipManifest, sha256Hex(mb))
	} else {
		corp, msgid, c.rep.ManifestSigned = co, m, true
	}
	return corp, msgid
}

// checkpoint is the checkpoint the proofs lead to.
func (c *checker) checkpoint(v note.Verifier) log.Checkpoint {
	var cp log.Checkpoint
	if v != nil {
		if b, err := c.read(zipCheckpoint); err != nil {
			c.problem("%v", err)
		} else if cp, err = openCheckpoint(b, v); err != nil {
			c.problem("%s: %v", zipCheckpoint, err)
		} else {
			c.rep.Origin, c.rep.Size, c.rep.Root = cp.Origin, cp.Size, hex.EncodeToString(cp.Hash)
		}
	}
	return cp
}

// newerCheckpoint checks the pack's checkpoint cp is consistent with the
// later one given (--checkpoint: the JSON yidu evidence consistency
// prints, its new checkpoint and path), and reports that one.
func (c *checker) newerCheckpoint(v note.Verifier, cp log.Checkpoint) {
	newer, err := openCheckpoint([]byte(c.opts.Newer), v)
	switch {
	case err != nil:
		c.problem("--checkpoint: %v", err)
	case newer.Origin != cp.Origin || newer.Size < cp.Size:
		c.problem("--checkpoint: %s of %d entries is not a later checkpoint of %s (%d entries)", newer.Origin, newer.Size, cp.Origin, cp.Size)
	default:
		var path [][]byte
		for _, h := range c.opts.Consistency {
			b, err := parseHash(h)
			if err != nil {
				c.problem("--checkpoint: its consistency path: %v", err)
			}
			path = append(path, b[:])
		}
		if err := proof.VerifyConsistency(rfc6962.DefaultHasher, cp.Size, newer.Size, path, cp.Hash, newer.Hash); err != nil {
			c.problem("the pack's checkpoint (%d entries) is not consistent with --checkpoint (%d): %v", cp.Size, newer.Size, err)
		} else {
			c.rep.Size, c.rep.Root = newer.Size, hex.EncodeToString(newer.Hash)
		}
	}
}

// people checks each person's files the manifest lists (their hashes,
// then their record against their proofs) and returns every name the
// pack is due to hold.
func (c *checker) people(rows [][]string, corp, msgid string, v note.Verifier) map[string]bool {
	listed := map[string]bool{zipManifest: true, zipManifestSig: true, zipCheckpoint: true, zipKey: true, zipReadme: true, zipVerifier: true}
	for _, row := range rows[1:] {
		if len(row) != len(manifestHeader) {
			c.problem("%s: a line of %d fields", zipManifest, len(row))
			continue
		}
		c.rep.People++
		dir, _, _ := strings.Cut(row[4], "/")
		content := map[string][]byte{}
		for _, col := range [][2]int{{4, 5}, {6, 7}, {8, 9}} {
			name, want := row[col[0]], row[col[1]]
			listed[name] = true
			d, base, _ := strings.Cut(name, "/")
			if d != dir || d == "" || d == "." || d == ".." || (base != pdfName && base != "proofs.json" && base != "record.json") {
				c.problem("%s: not in the person's directory %q", name, dir)
				continue
			}
			b, err := c.read(name)
			if err != nil {
				c.problem("%v", err)
				continue
			}
			if got := sha256Hex(b); got != want {
				c.problem("%s: sha256 %s, manifest says %s (the file was changed)", name, got, want)
				continue
			}
			c.rep.Files++
			content[base] = b
		}
		if content["proofs.json"] != nil && content["record.json"] != nil {
			checkPerson(&c.rep, dir, corp, msgid, content["record.json"], content["proofs.json"], v, c.opts.TSARoots, c.problem)
		}
	}
	return listed
}

func sha256Hex(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// manifestNoteHead is the first line of a manifest's signed note; the
// corp, the msgid and manifest.csv's SHA-256 follow, one a line.
const manifestNoteHead = "yidu evidence manifest v1"

func manifestNoteText(corp, msgid string, manifest []byte) string {
	return manifestNoteHead + "\n" + corp + "\n" + msgid + "\n" + sha256Hex(manifest) + "\n"
}

func parseManifestNote(text string) (corp, msgid, sum string, ok bool) {
	l := strings.Split(text, "\n")
	if len(l) != 5 || l[0] != manifestNoteHead || l[4] != "" {
		return "", "", "", false
	}
	return l[1], l[2], l[3], true
}

// openCheckpoint opens a signed checkpoint with v and parses it.
func openCheckpoint(signed []byte, v note.Verifier) (log.Checkpoint, error) {
	n, err := note.Open(signed, note.VerifierList(v))
	if err != nil {
		return log.Checkpoint{}, fmt.Errorf("not signed by the log's key: %w", err)
	}
	var c log.Checkpoint
	if _, err := c.Unmarshal([]byte(n.Text)); err != nil {
		return log.Checkpoint{}, err
	}
	return c, nil
}

// parseCheckpointText reads a checkpoint's text without checking its
// signature (the PDF prints it).
func parseCheckpointText(s string) (log.Checkpoint, bool) {
	var c log.Checkpoint
	if s == "" {
		return c, false
	}
	_, err := c.Unmarshal([]byte(s))
	return c, err == nil
}

// body is what Check reads of an entry's canonical body.
type body struct {
	Corp     string `json:"corp"`
	Seq      int64  `json:"seq"`
	Kind     string `json:"kind"`
	MsgID    string `json:"msgid"`
	UID      *int64 `json:"uid"`
	UserID   string `json:"userid"`
	ReadTime string `json:"read_time"`
	At       string `json:"at"`
	Source   int64  `json:"source"`
	Signal   string `json:"signal"`
	Version  int64  `json:"version"`
	Batch    *int64 `json:"batch"`
	ErrCode  int64  `json:"errcode"`
	SHA256   string `json:"sha256"`
}

// checkPerson checks one person's proofs.json and record.json: each
// entry proved and about them, each fact of the record among the entries.
func checkPerson(rep *CheckReport, dir, corp, msgid string, recJSON, proofsJSON []byte, v note.Verifier, tsaRoots *x509.CertPool, problem func(string, ...any)) {
	var pf ProofsFile
	if err := json.Unmarshal(proofsJSON, &pf); err != nil {
		problem("%s/proofs.json: %v", dir, err)
		return
	}
	var rec Record
	if err := json.Unmarshal(recJSON, &rec); err != nil {
		problem("%s/record.json: %v", dir, err)
		return
	}
	if pf.LedgerConnected {
		rep.LedgerConnected = true
	}
	if personDir(rec.Person) != dir || pf.UserID != rec.Person.UserID || pf.CorpID != rec.CorpID || pf.MsgID != rec.MsgID ||
		(corp != "" && (rec.CorpID != corp || rec.MsgID != msgid)) {
		problem("%s/record.json: about %s (uid %d) of %s/%s, in the folder %s of the pack of %s/%s with proofs of %s",
			dir, rec.Person.UserID, rec.Person.UID, rec.CorpID, rec.MsgID, dir, corp, msgid, pf.UserID)
		return
	}
	if !pf.LedgerConnected {
		return
	}
	if rec.Stamp != nil {
		checkStamp(rep, dir, rec, pf.Entries, v, tsaRoots, problem)
	}
	var proved []body
	for _, e := range pf.Entries {
		b, ok := checkEntry(rep, dir, rec, e, v, problem)
		if ok {
			rep.Proofs++
			proved = append(proved, b)
		}
	}
	has := func(what string, match func(b body) bool) {
		if slices.ContainsFunc(proved, match) {
			rep.Facts++
			return
		}
		problem("%s/record.json: %s is not proved by an entry of %s's (uid %d)", dir, what, rec.Person.UserID, rec.Person.UID)
	}
	sameTime := func(s string, t time.Time) bool {
		at, err := time.Parse(time.RFC3339Nano, s)
		return err == nil && at.Equal(t)
	}
	if rec.Read && rec.ReadTime != nil {
		has("the read at "+rec.ReadTime.Format(time.RFC3339), func(b body) bool { return b.Kind == "signal" && sameTime(b.ReadTime, *rec.ReadTime) })
	}
	for _, d := range rec.Deliveries {
		has(fmt.Sprintf("delivery batch %d at %s (errcode %d)", d.Batch, d.At.Format(time.RFC3339), d.ErrCode), func(b body) bool {
			return b.Kind == "send" && b.Batch != nil && *b.Batch == int64(d.Batch) && b.ErrCode == d.ErrCode && sameTime(b.At, d.At)
		})
	}
	for _, ver := range rec.Versions {
		has(fmt.Sprintf("version %d (sha256 %s)", ver.N, ver.SHA256), func(b body) bool {
			return b.Kind == "version" && b.Version == int64(ver.N) && b.SHA256 == ver.SHA256
		})
	}
	for _, sg := range rec.Signals {
		has(fmt.Sprintf("signal %s at %s", sg.Kind, sg.At.Format(time.RFC3339)), func(b body) bool {
			switch b.Kind {
			case "signal", "page":
				return sameTime(b.ReadTime, sg.At) && (b.Version == 0 || sg.VersionInferred || b.Version == int64(sg.Version))
			case "seen":
				return b.Signal == sg.Kind && sameTime(b.At, sg.At)
			}
			return false
		})
	}
}

// checkEntry checks one entry: its body hashes to its leaf and is about
// rec's person, its proof leads to the root of a checkpoint v signed.
func checkEntry(rep *CheckReport, dir string, rec Record, e Entry, v note.Verifier, problem func(string, ...any)) (body, bool) {
	name := dir + "/proofs.json"
	var b body
	if e.Proof == nil {
		problem("%s: entry %d has no proof", name, e.Seq)
		return b, false
	}
	leaf, err := parseHash(e.LeafHash)
	if err != nil {
		problem("%s: entry %d: %v", name, e.Seq, err)
		return b, false
	}
	if e.Body != "" {
		if LeafHash([]byte(e.Body)) != leaf {
			problem("%s: entry %d: its body does not hash to its leaf %s", name, e.Seq, e.LeafHash)
			return b, false
		}
		if err := json.Unmarshal([]byte(e.Body), &b); err != nil {
			problem("%s: entry %d: its body: %v", name, e.Seq, err)
			return b, false
		}
		if b.Corp != rec.CorpID || b.MsgID != rec.MsgID || b.Seq != e.Seq || b.Kind != e.Kind ||
			(b.UID != nil && *b.UID != int64(rec.Person.UID)) || (b.UserID != "" && b.UserID != rec.Person.UserID) {
			problem("%s: entry %d is about %s of %s/%s, not %s (uid %d) of %s/%s",
				name, e.Seq, entryWho(b), b.Corp, b.MsgID, rec.Person.UserID, rec.Person.UID, rec.CorpID, rec.MsgID)
			return b, false
		}
	}
	p := e.Proof
	if p.Index != e.Seq-1 {
		problem("%s: entry %d: proof is for leaf %d", name, e.Seq, p.Index)
		return b, false
	}
	if err := verifyDoc(e.LeafHash, *p); err != nil {
		problem("%s: entry %d (%s, leaf %d of %d): %v", name, e.Seq, e.Kind, p.Index, p.TreeSize, err)
		return b, false
	}
	if v == nil {
		return b, false
	}
	cp, err := openCheckpoint([]byte(p.Checkpoint), v)
	if err != nil {
		problem("%s: entry %d: its checkpoint: %v", name, e.Seq, err)
		return b, false
	}
	if int64(cp.Size) != p.TreeSize || hex.EncodeToString(cp.Hash) != p.Root || !strings.HasSuffix(cp.Origin, "/"+rec.CorpID) {
		problem("%s: entry %d: the proof's root %s of %d is not its signed checkpoint's (%s %d %x)", name, e.Seq, p.Root, p.TreeSize, cp.Origin, cp.Size, cp.Hash)
		return b, false
	}
	return b, e.Body != ""
}

func entryWho(b body) string {
	switch {
	case b.UserID != "":
		return b.UserID
	case b.UID != nil:
		return "uid " + strconv.FormatInt(*b.UID, 10)
	}
	return "the notice"
}

// verifyDoc checks one proof as JSON carries it.
func verifyDoc(leafHex string, p ProofDoc) error {
	leaf, err := parseHash(leafHex)
	if err != nil {
		return err
	}
	root, err := parseHash(p.Root)
	if err != nil {
		return err
	}
	path := make([][32]byte, len(p.Path))
	for i, s := range p.Path {
		if path[i], err = parseHash(s); err != nil {
			return err
		}
	}
	return VerifyInclusion(leaf, p.Index, p.TreeSize, path, root)
}
