package migrations_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/yidu-io/yidu/migrations"
)

// owners names, for every table the migrations create, the one package
// (its directory under the module) whose production code writes it: one
// owner per table group (issue 47). Another package that needs one of
// these written calls the owner (retention's purge calls each owner's
// DeleteNotice; the registration's recipient rows are flushd's, written
// through flushd.InsertRecipients, in a standing notice's enrolment
// transaction too).
var owners = map[string]string{
	// The directory.
	"users":              "idmap",
	"uid_seq":            "idmap",
	"departments":        "idmap",
	"user_departments":   "idmap",
	"department_leaders": "idmap",
	"tags":               "idmap",
	"tag_users":          "idmap",
	"tag_departments":    "idmap",
	"directory_versions": "idmap",
	// Who holds which role, as yidu.yaml last granted it.
	"role_grants": "access",

	// Notices: drafts and schedules, acts, approvals, templates (the
	// notice service's storage).
	"campaigns":             "campaign/store",
	"manual_reminders":      "campaign/store",
	"notice_acts":           "campaign/store",
	"notice_approvals":      "campaign/store",
	"approval_card_retries": "campaign/store",
	"notice_templates":      "campaign/store",
	// Follow-up rounds and standing notices (the notice loops).
	"follow_ups":        "campaign/loops",
	"follow_up_rounds":  "campaign/loops",
	"follow_up_batches": "campaign/loops",
	"reminder_log":      "campaign/loops",
	"standing_notices":  "campaign/loops",
	"standing_cycles":   "campaign/loops",
	"standing_rounds":   "campaign/loops",
	// Versions of a notice's content, and the msgids handed out.
	"notice_versions": "notice",
	"msgids":          "internal/namespace",

	// Sends: the registered message, its send batches, the recipients'
	// departments at send time, a standing notice's enrolments.
	"messages":            "tracker",
	"message_sends":       "tracker",
	"send_departments":    "tracker",
	"standing_enrolments": "tracker",

	// Reads and page signals: the read archive, and the receipts of the
	// acknowledgements, queued in the transaction that records them
	// (tracker's receipt loop claims and settles them through flushd's
	// ClaimReceipts and SetReceipt).
	"message_read_record": "flushd",
	"read_orphans":        "flushd",
	"page_signals":        "flushd",
	"ack_receipts":        "flushd",

	// Audit, the evidence ledger, attachments, and what a purge keeps.
	"audit_events":       "audit",
	"ledger_heads":       "ledger",
	"ledger_blocks":      "ledger",
	"ledger_roots":       "ledger",
	"ledger_checkpoints": "ledger",
	"attachments":        "attachment",
	"attachment_blobs":   "attachment",
	"attachment_chunks":  "attachment",
	"message_summaries":  "retention",
}

// exempt are the packages whose SQL is not the product's: their writes
// are not counted.
var exempt = map[string]string{
	"cmd/yidu-bench/naive": "the design yidu replaces (one UPDATE per callback), kept as the benchmark's comparison",
	"internal/testenv":     "test only: fixtures a test writes by hand",
	"internal/embedded":    "demo and test only: the in-process MySQL-protocol server",
}

// dynamicWriters are the packages that name a table in a variable (a
// constant of theirs, never input), with the tables they may so name:
// each must be the package's own.
var dynamicWriters = map[string][]string{
	// store.Lease{Table: …}: one conditional UPDATE claiming a row of
	// the table its caller names (the lease's columns only). The store
	// claims its own tables with it, the loops their rounds: each name
	// is its owner's literal, which this test holds to its owner.
	"campaign/store": {"campaigns", "notice_acts", "approval_card_retries"},
	"campaign/loops": {"follow_up_rounds"},
	// The directory sync's pairs (tags.go).
	"idmap": {"tag_users", "tag_departments", "department_leaders"},
}

// TestOneWriterPerTable reads every production .go file of the module
// and finds each SQL statement that writes (a string constant, literals
// and constants concatenated, starting with INSERT, REPLACE, UPDATE,
// DELETE or TRUNCATE in capitals, as yidu writes its SQL: prose such as
// "update card sent" is no statement), and fails when a table is written
// from a package other than its owner, when a statement's table cannot
// be told from its text, or when a table the migrations create has no
// owner.
func TestOneWriterPerTable(t *testing.T) {
	tables := migratedTables(t)
	for _, tb := range tables {
		if owners[tb] == "" {
			t.Errorf("table %s (migrations) has no owner: add it to owners", tb)
		}
	}
	for tb := range owners {
		if !slices.Contains(tables, tb) {
			t.Errorf("owners lists %s, which no migration creates", tb)
		}
	}
	writes := scanWrites(t, "..")
	if n := len(slices.DeleteFunc(slices.Clone(writes), func(w write) bool { return w.name })); n < 50 {
		t.Fatalf("found %d writing statements; the scan is broken", n)
	}
	for pkg, tbs := range dynamicWriters {
		for _, tb := range tbs {
			if owners[tb] != pkg {
				t.Errorf("dynamicWriters lets %s name %s, whose owner is %q", pkg, tb, owners[tb])
			}
		}
	}
	writers := map[string]map[string][]string{} // table → package → places
	for _, w := range writes {
		if exempt[w.pkg] != "" {
			continue
		}
		if w.name {
			// A package that names its tables in variables names only
			// its own anywhere.
			if dynamicWriters[w.pkg] != nil && slices.Contains(tables, w.sql) && owners[w.sql] != w.pkg {
				t.Errorf("%s: %s names %s (its owner is %s) and writes tables it names in variables", w.pos, w.pkg, w.sql, owners[w.sql])
			}
			continue
		}
		if w.problem != "" {
			if dynamicWriters[w.pkg] == nil {
				t.Errorf("%s: %s: %.80q", w.pos, w.problem, w.sql)
			}
			continue
		}
		for _, tb := range w.tables {
			if !slices.Contains(tables, tb) {
				t.Errorf("%s: writes %s, which no migration creates: %.80q", w.pos, tb, w.sql)
				continue
			}
			if writers[tb] == nil {
				writers[tb] = map[string][]string{}
			}
			writers[tb][w.pkg] = append(writers[tb][w.pkg], w.pos)
		}
	}
	for _, tb := range tables {
		for pkg, places := range writers[tb] {
			if pkg != owners[tb] {
				for _, pos := range places {
					t.Errorf("%s: table %s written from package %s; its owner is %s", pos, tb, pkg, owners[tb])
				}
			}
		}
		if _, ok := writers[tb][owners[tb]]; !ok && owners[tb] != "" && !slices.Contains(dynamicWriters[owners[tb]], tb) {
			t.Logf("table %s: its owner %s writes it nowhere", tb, owners[tb])
		}
	}
}

// TestWriteTargets checks the statement parser on the shapes the code uses.
func TestWriteTargets(t *testing.T) {
	tests := []struct {
		sql     string
		want    []string
		dynamic bool
	}{
		{"INSERT INTO users (a) VALUES (?)", []string{"users"}, false},
		{"INSERT IGNORE INTO `ack_receipts` (a) VALUES ", []string{"ack_receipts"}, false},
		{"INSERT LOW_PRIORITY users SET a = 1", []string{"users"}, false},
		{"REPLACE INTO tags (a) VALUES (1)", []string{"tags"}, false},
		{"INSERT INTO ledger_heads (a) VALUES (?) ON DUPLICATE KEY UPDATE next_seq = next_seq", []string{"ledger_heads"}, false},
		{"INSERT IGNORE INTO message_summaries (a) SELECT a FROM message_summary s JOIN (SELECT 1 FROM message_read_record) c", []string{"message_summaries"}, false},
		{"\n\t UPDATE messages SET state = 1 WHERE corp_id = ?", []string{"messages"}, false},
		{"UPDATE IGNORE yidu.messages m SET m.state = 1", []string{"messages"}, false},
		{"UPDATE message_read_record SET ", []string{"message_read_record"}, false},
		{"UPDATE JSON_TABLE(?, '$[*]' COLUMNS(uid INT UNSIGNED PATH '$[0]')) AS d STRAIGHT_JOIN message_read_record r ON r.uid = d.uid SET r.is_read = 1", []string{"message_read_record"}, false},
		{"UPDATE message_read_record r JOIN read_orphans o ON o.uid = r.uid SET r.read_time = o.read_time WHERE r.corp_id = ?", []string{"message_read_record"}, false},
		{"UPDATE a x, b y SET y.c = 1, x.d = (SELECT 1 FROM c z WHERE z.q = 2)", []string{"a", "b"}, false},
		{"UPDATE a JOIN b ON a.x = b.x SET c = 1", []string{"a", "b"}, false},
		{"DELETE FROM audit_events WHERE at < ? ORDER BY id LIMIT 5000", []string{"audit_events"}, false},
		{"DELETE QUICK IGNORE FROM tags WHERE corp_id = ?", []string{"tags"}, false},
		{"DELETE o FROM read_orphans o JOIN message_read_record r ON r.uid = o.uid WHERE o.corp_id = ?", []string{"read_orphans"}, false},
		{"DELETE o, r FROM read_orphans AS o INNER JOIN message_read_record r USING (uid)", []string{"message_read_record", "read_orphans"}, false},
		{"DELETE FROM o USING read_orphans o JOIN message_read_record r", []string{"read_orphans"}, false},
		{"TRUNCATE TABLE tags", []string{"tags"}, false},
		{"DELETE FROM \x00 WHERE corp_id = ?", nil, true},
		{"INSERT IGNORE INTO %s (corp_id) VALUES ", nil, true},
		{"UPDATE \x00 SET a = 1", nil, true},
	}
	for _, tt := range tests {
		got, dyn, ok := writeTargets(tt.sql)
		if !ok || dyn != tt.dynamic || (!dyn && !slices.Equal(got, tt.want)) {
			t.Errorf("writeTargets(%q) = %v, %v, %v; want %v, %v, true", tt.sql, got, dyn, ok, tt.want, tt.dynamic)
		}
	}
	for _, s := range []string{"update failed: %w", "SELECT 1 FROM users FOR UPDATE", "UPDATE JSON_TABLE(", " ON DUPLICATE KEY UPDATE a = VALUES(a)", "UPDATE", "DELETE"} {
		if got, dyn, ok := writeTargets(s); ok {
			t.Errorf("writeTargets(%q) = %v, %v, true; want not a statement", s, got, dyn)
		}
	}
}

var createTable = regexp.MustCompile("(?i)\\bCREATE\\s+TABLE\\s+(?:IF\\s+NOT\\s+EXISTS\\s+)?`?(\\w+)")

// migratedTables lists the tables the up migrations create.
func migratedTables(t *testing.T) []string {
	t.Helper()
	var out []string
	err := fs.WalkDir(migrations.FS(), ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".sql") {
			return err
		}
		b, err := fs.ReadFile(migrations.FS(), path)
		if err != nil {
			return err
		}
		up, _, _ := strings.Cut(string(b), "-- +goose Down")
		for _, m := range createTable.FindAllStringSubmatch(up, -1) {
			out = append(out, strings.ToLower(m[1]))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(out) < 40 {
		t.Fatalf("found %d tables in the migrations; the scan is broken", len(out))
	}
	sort.Strings(out)
	return out
}

// write is one writing statement found in the source, or (name) a
// string that is only a name, which may be a table's.
type write struct {
	pkg, pos, sql string
	tables        []string
	problem       string
	name          bool
}

var bareName = regexp.MustCompile(`^[a-z_]+$`)

// scanWrites parses every production .go file under root.
func scanWrites(t *testing.T, root string) []write {
	t.Helper()
	byDir := map[string][]string{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path != root && (strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") || name == "testdata" || name == "vendor" || name == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(name, ".go") && !strings.HasSuffix(name, "_test.go") {
			byDir[filepath.Dir(path)] = append(byDir[filepath.Dir(path)], path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var out []write
	fset := token.NewFileSet()
	for dir, files := range byDir {
		rel, err := filepath.Rel(root, dir)
		if err != nil {
			t.Fatal(err)
		}
		pkg := filepath.ToSlash(rel)
		var parsed []*ast.File
		for _, f := range files {
			src, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			af, err := parser.ParseFile(fset, f, src, 0)
			if err != nil {
				t.Fatal(err)
			}
			parsed = append(parsed, af)
		}
		c := &consts{top: map[string]ast.Expr{}, memo: map[ast.Expr]*string{}}
		for _, af := range parsed {
			for _, decl := range af.Decls {
				gd, ok := decl.(*ast.GenDecl)
				if !ok || gd.Tok != token.CONST {
					continue
				}
				for _, spec := range gd.Specs {
					vs := spec.(*ast.ValueSpec)
					for i, n := range vs.Names {
						if i < len(vs.Values) {
							c.top[n.Name] = vs.Values[i]
						}
					}
				}
			}
		}
		for _, af := range parsed {
			for _, s := range c.strings(af) {
				if bareName.MatchString(s.text) {
					p := fset.Position(s.pos)
					rel, _ := filepath.Rel(root, p.Filename)
					out = append(out, write{pkg: pkg, pos: filepath.ToSlash(rel) + ":" + strconv.Itoa(p.Line), sql: s.text, name: true})
					continue
				}
				tables, dyn, ok := writeTargets(s.text)
				if !ok {
					continue
				}
				p := fset.Position(s.pos)
				rel, _ := filepath.Rel(root, p.Filename)
				w := write{pkg: pkg, pos: filepath.ToSlash(rel) + ":" + strconv.Itoa(p.Line), sql: s.text, tables: tables}
				if dyn {
					w.problem = "a write whose table is not in the statement's text (name it in a literal)"
				}
				out = append(out, w)
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].pos < out[j].pos })
	return out
}

// consts evaluates a package's string constants.
type consts struct {
	top  map[string]ast.Expr // package-level constants by name
	memo map[ast.Expr]*string
}

// dynamic stands for a value the source does not fix (a variable, a call).
const dynamic = "\x00"

type found struct {
	pos  token.Pos
	text string
}

// strings returns every maximal string expression of f: a literal, or
// literals and constants joined by +, with anything else as dynamic.
func (c *consts) strings(f *ast.File) []found {
	var out []found
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.BinaryExpr:
			if n.Op != token.ADD {
				return true
			}
			var parts []ast.Expr
			flatten(n, &parts)
			var b strings.Builder
			hasLit := false
			for _, p := range parts {
				if s, ok := c.value(p); ok {
					b.WriteString(s)
					if _, lit := p.(*ast.BasicLit); lit {
						hasLit = true
					}
					continue
				}
				b.WriteString(dynamic)
				ast.Inspect(p, func(m ast.Node) bool { // literals inside, e.g. a call's argument
					if bl, ok := m.(*ast.BasicLit); ok && bl.Kind == token.STRING {
						if s, err := strconv.Unquote(bl.Value); err == nil {
							out = append(out, found{bl.Pos(), s})
						}
					}
					return true
				})
			}
			if hasLit || b.Len() > 0 {
				out = append(out, found{n.Pos(), b.String()})
			}
			return false
		case *ast.BasicLit:
			if n.Kind == token.STRING {
				if s, err := strconv.Unquote(n.Value); err == nil {
					out = append(out, found{n.Pos(), s})
				}
			}
		}
		return true
	})
	return out
}

func flatten(e ast.Expr, parts *[]ast.Expr) {
	switch e := e.(type) {
	case *ast.ParenExpr:
		flatten(e.X, parts)
	case *ast.BinaryExpr:
		if e.Op == token.ADD {
			flatten(e.X, parts)
			flatten(e.Y, parts)
			return
		}
		*parts = append(*parts, e)
	default:
		*parts = append(*parts, e)
	}
}

// value is e's string value when e is a constant string expression.
func (c *consts) value(e ast.Expr) (string, bool) {
	if v, ok := c.memo[e]; ok {
		if v == nil {
			return "", false
		}
		return *v, true
	}
	c.memo[e] = nil // a cycle is not a constant
	var s string
	ok := false
	switch e := e.(type) {
	case *ast.BasicLit:
		if e.Kind == token.STRING {
			var err error
			s, err = strconv.Unquote(e.Value)
			ok = err == nil
		}
	case *ast.ParenExpr:
		s, ok = c.value(e.X)
	case *ast.BinaryExpr:
		if e.Op == token.ADD {
			var x, y string
			if x, ok = c.value(e.X); ok {
				y, ok = c.value(e.Y)
				s = x + y
			}
		}
	case *ast.Ident:
		var def ast.Expr
		if e.Obj != nil {
			if e.Obj.Kind == ast.Con {
				if vs, isSpec := e.Obj.Decl.(*ast.ValueSpec); isSpec {
					for i, n := range vs.Names {
						if n.Name == e.Name && i < len(vs.Values) {
							def = vs.Values[i]
						}
					}
				}
			}
		} else {
			def = c.top[e.Name]
		}
		if def != nil {
			s, ok = c.value(def)
		}
	}
	if ok {
		c.memo[e] = &s
	}
	return s, ok
}

// sqlTokens splits SQL text: words (identifiers, keywords, numbers,
// backquoted names), quoted strings as ', and single punctuation.
func sqlTokens(s string) []string {
	var out []string
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			i++
		case c == '-' && strings.HasPrefix(s[i:], "--"):
			for i < len(s) && s[i] != '\n' {
				i++
			}
		case c == '/' && strings.HasPrefix(s[i:], "/*"):
			end := strings.Index(s[i+2:], "*/")
			if end < 0 {
				return out
			}
			i += end + 4
		case c == '`':
			end := strings.IndexByte(s[i+1:], '`')
			if end < 0 {
				return append(out, s[i+1:])
			}
			out = append(out, s[i+1:i+1+end])
			i += end + 2
		case c == '\'' || c == '"':
			j := i + 1
			for j < len(s) && s[j] != c {
				if s[j] == '\\' {
					j++
				}
				j++
			}
			out = append(out, "'")
			i = j + 1
		case c == '%' && i+1 < len(s) && strings.IndexByte("sqv", s[i+1]) >= 0:
			out = append(out, dynamic)
			i += 2
		case c == '_' || c == '$' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z':
			j := i
			for j < len(s) && (s[j] == '_' || s[j] == '$' || s[j] >= '0' && s[j] <= '9' || s[j] >= 'a' && s[j] <= 'z' || s[j] >= 'A' && s[j] <= 'Z') {
				j++
			}
			out = append(out, s[i:j])
			i = j
		default:
			out = append(out, s[i:i+1])
			i++
		}
	}
	return out
}

// keywords end a table factor's alias.
var keywords = map[string]bool{
	"AS": true, "JOIN": true, "INNER": true, "LEFT": true, "RIGHT": true, "CROSS": true, "OUTER": true,
	"NATURAL": true, "STRAIGHT_JOIN": true, "ON": true, "USING": true, "SET": true, "WHERE": true,
	"ORDER": true, "LIMIT": true, "FROM": true, "PARTITION": true, "USE": true, "FORCE": true, "IGNORE": true,
}

// writeTargets parses a statement's head: ok when s is a write (its first
// word, in capitals, INSERT, REPLACE, UPDATE, DELETE or TRUNCATE, and a
// table after it), the tables it writes, sorted, or dynamic when one of
// them is not in the text.
func writeTargets(s string) (tables []string, dyn, ok bool) {
	tok := sqlTokens(s)
	if len(tok) < 2 {
		return nil, false, false
	}
	i := 1
	skip := func(words ...string) {
		for i < len(tok) && slices.Contains(words, strings.ToUpper(tok[i])) {
			i++
		}
	}
	name := func() (string, bool) { // a table name at i, maybe schema-qualified
		if i >= len(tok) {
			return "", false
		}
		n := tok[i]
		i++
		if i+1 < len(tok) && tok[i] == "." {
			n = tok[i+1]
			i += 2
		}
		return n, true
	}
	add := func(n string) {
		if n == dynamic || strings.Contains(n, dynamic) {
			dyn = true
			return
		}
		n = strings.ToLower(n)
		if !slices.Contains(tables, n) {
			tables = append(tables, n)
		}
	}
	switch tok[0] {
	case "INSERT", "REPLACE":
		skip("LOW_PRIORITY", "DELAYED", "HIGH_PRIORITY", "IGNORE")
		skip("INTO")
		n, ok := name()
		if !ok || !isName(n) {
			return nil, false, false
		}
		add(n)
	case "TRUNCATE":
		skip("TABLE")
		n, ok := name()
		if !ok || !isName(n) {
			return nil, false, false
		}
		add(n)
	case "UPDATE":
		skip("LOW_PRIORITY", "IGNORE")
		refs, end := tableRefs(tok, i, "SET")
		if len(refs) == 0 {
			return nil, false, false // a fragment: "UPDATE JSON_TABLE("
		}
		quals, unqualified := setTargets(tok, end+1)
		if end >= len(tok) || len(refs) == 1 {
			for _, r := range refs {
				add(r.table)
			}
			break
		}
		for _, q := range quals {
			for _, r := range refs {
				if strings.EqualFold(r.alias, q) || r.alias == "" && strings.EqualFold(r.table, q) {
					add(r.table)
				}
			}
		}
		if unqualified { // MySQL finds the column's table; so may any of them
			for _, r := range refs {
				add(r.table)
			}
		}
	case "DELETE":
		skip("LOW_PRIORITY", "QUICK", "IGNORE")
		if i >= len(tok) {
			return nil, false, false
		}
		var names []string
		var refs []ref
		if strings.EqualFold(tok[i], "FROM") {
			i++
			start := i
			refs, _ = tableRefs(tok, i, "USING")
			j := start
			for j < len(tok) && !strings.EqualFold(tok[j], "USING") {
				j++
			}
			if j == len(tok) { // DELETE FROM t [WHERE …]
				if len(refs) == 0 {
					return nil, false, false
				}
				add(refs[0].table)
				break
			}
			// DELETE FROM a, b USING refs
			for _, r := range refs {
				names = append(names, r.table)
			}
			refs, _ = tableRefs(tok, j+1, "")
		} else {
			// DELETE a, b FROM refs
			for i < len(tok) && !strings.EqualFold(tok[i], "FROM") {
				if isName(tok[i]) && tok[i-1] != "." { // a or a.*
					names = append(names, tok[i])
				}
				i++
			}
			if i >= len(tok) {
				return nil, false, false
			}
			refs, _ = tableRefs(tok, i+1, "")
		}
		for _, n := range names {
			if n == dynamic {
				add(n)
				continue
			}
			for _, r := range refs {
				if strings.EqualFold(r.alias, n) || r.alias == "" && strings.EqualFold(r.table, n) {
					add(r.table)
				}
			}
		}
	default:
		return nil, false, false
	}
	if len(tables) == 0 && !dyn {
		return nil, false, false
	}
	sort.Strings(tables)
	return tables, dyn, true
}

func isName(s string) bool {
	if s == dynamic {
		return true
	}
	if s == "" || s == "'" || !(s[0] == '_' || s[0] >= 'a' && s[0] <= 'z' || s[0] >= 'A' && s[0] <= 'Z') {
		return false
	}
	return !keywords[strings.ToUpper(s)]
}

// ref is a table of a table reference list, with its alias.
type ref struct{ table, alias string }

// tableRefs reads the table references from tok[i] to the keyword stop
// (or WHERE, ORDER, LIMIT, the end) at depth 0, and returns them with
// the index of stop (len(tok) when missing). A derived table or
// JSON_TABLE is no table.
func tableRefs(tok []string, i int, stop string) ([]ref, int) {
	var refs []ref
	expect := true // a table factor comes next
	depth := 0
	for ; i < len(tok); i++ {
		w := tok[i]
		switch w {
		case "(":
			depth++
			continue
		case ")":
			depth--
			continue
		}
		if depth > 0 {
			continue
		}
		u := strings.ToUpper(w)
		if stop != "" && u == stop || u == "WHERE" || u == "ORDER" || u == "LIMIT" {
			return refs, i
		}
		switch {
		case w == "," || u == "JOIN" || u == "STRAIGHT_JOIN":
			expect = true
		case expect && isName(w):
			expect = false
			if i+1 < len(tok) && tok[i+1] == "(" { // JSON_TABLE(…), a function
				continue
			}
			r := ref{table: w}
			if i+2 < len(tok) && tok[i+1] == "." {
				r.table = tok[i+2]
				i += 2
			}
			j := i + 1
			if j < len(tok) && strings.EqualFold(tok[j], "AS") {
				j++
			}
			if j < len(tok) && isName(tok[j]) && tok[j] != dynamic {
				r.alias = tok[j]
				i = j
			}
			refs = append(refs, r)
		}
	}
	return refs, len(tok)
}

// setTargets reads an UPDATE's assignments from tok[i]: the qualifiers
// of the columns assigned, and whether one is unqualified.
func setTargets(tok []string, i int) (quals []string, unqualified bool) {
	depth := 0
	lhs := true
	for ; i < len(tok); i++ {
		switch w := tok[i]; {
		case w == "(":
			depth++
		case w == ")":
			depth--
		case depth > 0:
		case w == ",":
			lhs = true
		case strings.EqualFold(w, "WHERE") || strings.EqualFold(w, "ORDER") || strings.EqualFold(w, "LIMIT"):
			return quals, unqualified
		case lhs && w != "=":
			if i+2 < len(tok) && tok[i+1] == "." {
				quals = append(quals, w)
			} else {
				unqualified = true
			}
			lhs = false
		}
	}
	return quals, unqualified
}
