package evidence

import (
	"archive/zip"
	"crypto/sha256"
	"encoding/csv"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
)

// maxCheckedFile bounds one file Check reads from a ZIP (a PDF is tens of
// kB): a hostile ZIP cannot make it inflate gigabytes.
const maxCheckedFile = 64 << 20

// ErrCheck: the ZIP does not hold up; CheckReport.Problems says where.
var ErrCheck = errors.New("evidence: check failed")

// CheckReport is what Check found.
type CheckReport struct {
	People int
	// Files: files whose SHA-256 matched the manifest; Proofs: inclusion
	// proofs verified against their day's root.
	Files, Proofs int
	// LedgerConnected: at least one person's proofs.json came from a
	// connected ledger.
	LedgerConnected bool
	Problems        []string
}

// Check verifies an evidence ZIP offline: each file listed in
// manifest.csv has its SHA-256, no other file is in a person's directory,
// and each proof in each proofs.json leads from its leaf to its day's
// root (RFC 6962), which is the root roots.json gives for that day. It
// returns ErrCheck when anything fails, with every problem in the report.
func Check(r io.ReaderAt, size int64) (CheckReport, error) {
	var rep CheckReport
	zr, err := zip.NewReader(r, size)
	if err != nil {
		return rep, fmt.Errorf("evidence: not a zip: %w", err)
	}
	files := map[string]*zip.File{}
	for _, f := range zr.File {
		if _, dup := files[f.Name]; dup {
			rep.Problems = append(rep.Problems, fmt.Sprintf("%s: twice in the zip", f.Name))
		}
		files[f.Name] = f
	}
	read := func(name string) ([]byte, error) {
		f, ok := files[name]
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
	problem := func(format string, a ...any) { rep.Problems = append(rep.Problems, fmt.Sprintf(format, a...)) }

	rootsJSON, err := read(zipRoots)
	roots := map[string]string{}
	if err != nil {
		problem("%v", err)
	} else if err := json.Unmarshal(rootsJSON, &roots); err != nil {
		problem("%s: %v", zipRoots, err)
	}
	mb, err := read(zipManifest)
	if err != nil {
		problem("%v", err)
		return rep, fmt.Errorf("%w: %s", ErrCheck, strings.Join(rep.Problems, "; "))
	}
	rows, err := csv.NewReader(strings.NewReader(string(mb))).ReadAll()
	if err != nil || len(rows) == 0 || !slices.Equal(rows[0], manifestHeader) {
		problem("%s: not the manifest yidu writes (%v)", zipManifest, err)
		return rep, fmt.Errorf("%w: %s", ErrCheck, strings.Join(rep.Problems, "; "))
	}
	listed := map[string]bool{zipManifest: true, zipRoots: true, zipReadme: true}
	for _, row := range rows[1:] {
		if len(row) != len(manifestHeader) {
			problem("%s: a line of %d fields", zipManifest, len(row))
			continue
		}
		rep.People++
		dir, _, _ := strings.Cut(row[4], "/")
		for _, c := range [][2]int{{4, 5}, {6, 7}, {8, 9}} {
			name, want := row[c[0]], row[c[1]]
			listed[name] = true
			d, base, _ := strings.Cut(name, "/")
			if d != dir || d == "" || d == "." || d == ".." || (base != pdfName && base != "proofs.json" && base != "record.json") {
				problem("%s: not in the person's directory %q", name, dir)
				continue
			}
			b, err := read(name)
			if err != nil {
				problem("%v", err)
				continue
			}
			sum := sha256.Sum256(b)
			if got := hex.EncodeToString(sum[:]); got != want {
				problem("%s: sha256 %s, manifest says %s (the file was changed)", name, got, want)
				continue
			}
			rep.Files++
			if c[0] == 6 {
				checkProofs(&rep, name, b, roots, problem)
			}
		}
	}
	for name := range files {
		if !listed[name] && !strings.HasSuffix(name, "/") {
			problem("%s: not in the manifest", name)
		}
	}
	if len(rep.Problems) > 0 {
		return rep, fmt.Errorf("%w: %d problems", ErrCheck, len(rep.Problems))
	}
	return rep, nil
}

func checkProofs(rep *CheckReport, name string, b []byte, roots map[string]string, problem func(string, ...any)) {
	var pf ProofsFile
	if err := json.Unmarshal(b, &pf); err != nil {
		problem("%s: %v", name, err)
		return
	}
	if pf.LedgerConnected {
		rep.LedgerConnected = true
	}
	for _, e := range pf.Entries {
		if e.Proof == nil {
			problem("%s: entry %d has no proof", name, e.Seq)
			continue
		}
		if err := verifyDoc(e.LeafHash, *e.Proof); err != nil {
			problem("%s: entry %d (%s, %s #%d): %v", name, e.Seq, e.Kind, e.Day, e.Index, err)
			continue
		}
		if e.Proof.Day != e.Day || e.Proof.Index != e.Index {
			problem("%s: entry %d: proof is for %s #%d", name, e.Seq, e.Proof.Day, e.Proof.Index)
			continue
		}
		if r, ok := roots[e.Day]; !ok || r != e.Proof.Root {
			problem("%s: entry %d: root %s of %s is not the one %s gives (%s)", name, e.Seq, e.Proof.Root, e.Day, zipRoots, r)
			continue
		}
		if r := pf.Roots[e.Day]; r != e.Proof.Root {
			problem("%s: entry %d: root of %s differs from the file's roots", name, e.Seq, e.Day)
			continue
		}
		rep.Proofs++
	}
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
