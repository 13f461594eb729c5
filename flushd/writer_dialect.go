package flushd

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"
	"strings"
)

// Statement is the form of the batch UPDATE (see the package doc,
// "Statement forms"). The zero value is StatementJSONTable.
type Statement int

const (
	// StatementJSONTable binds the batch as one JSON array that JSON_TABLE
	// turns into rows joined by primary key: 3 placeholders per statement.
	// MariaDB 10.6+, MySQL 8.0.4+ and go-mysql-server have JSON_TABLE.
	StatementJSONTable Statement = iota
	// StatementCase binds every value: UPDATE … SET col = CASE uid WHEN ?
	// THEN ? … END … WHERE uid IN (…), for servers without JSON_TABLE
	// (TiDB, MariaDB before 10.6). At most maxCaseBatch uids a statement.
	StatementCase
)

// String returns the statement's name as logs and docs use it.
func (s Statement) String() string {
	switch s {
	case StatementJSONTable:
		return "json_table"
	case StatementCase:
		return "case"
	}
	return "statement(" + strconv.Itoa(int(s)) + ")"
}

// Dialect is the SQL server family of the archive (config mysql.dialect).
type Dialect string

// The servers yidu knows; docs/scaling.md says which of them are tested.
const (
	DialectMariaDB Dialect = "mariadb"
	DialectMySQL   Dialect = "mysql"
	DialectTiDB    Dialect = "tidb"
)

// DialectOf tells the server family from its VERSION(): TiDB answers like
// "8.0.11-TiDB-v7.5.1", MariaDB like "10.11.6-MariaDB-0+deb12u1" (or with
// the "5.5.5-" prefix some proxies add); anything else is taken for MySQL.
func DialectOf(version string) Dialect {
	v := strings.ToLower(version)
	switch {
	case strings.Contains(v, "tidb"):
		return DialectTiDB
	case strings.Contains(v, "mariadb"):
		return DialectMariaDB
	}
	return DialectMySQL
}

// StatementFor returns the statement form for server family d at version
// (VERSION()'s answer, "" when not asked: the family's current releases
// are assumed). JSON_TABLE wherever the server has it, measured faster on
// MariaDB 10.11 (docs/benchmarks.md); the CASE form elsewhere: TiDB has no
// JSON_TABLE, MariaDB has it from 10.6, MySQL from 8.0.4.
func StatementFor(d Dialect, version string) Statement {
	switch d {
	case DialectTiDB:
		return StatementCase
	case DialectMariaDB:
		if version != "" && versionBefore(strings.TrimPrefix(version, "5.5.5-"), 10, 6, 0) {
			return StatementCase
		}
	case DialectMySQL:
		if version != "" && versionBefore(version, 8, 0, 4) {
			return StatementCase
		}
	}
	return StatementJSONTable
}

// versionBefore reports whether version's leading "major.minor.patch" is
// below the one given. An unreadable version is not before anything.
func versionBefore(version string, major, minor, patch int) bool {
	var got [3]int
	rest := version
	for i := range got {
		end := 0
		for end < len(rest) && rest[end] >= '0' && rest[end] <= '9' {
			end++
		}
		if end == 0 {
			if i == 0 {
				return false
			}
			break
		}
		got[i], _ = strconv.Atoi(rest[:end])
		rest = rest[end:]
		if !strings.HasPrefix(rest, ".") {
			break
		}
		rest = rest[1:]
	}
	want := [3]int{major, minor, patch}
	for i := range got {
		if got[i] != want[i] {
			return got[i] < want[i]
		}
	}
	return false
}

// ServerVersion returns db's SELECT VERSION().
func ServerVersion(ctx context.Context, db DB) (string, error) {
	rows, err := db.QueryContext(ctx, "SELECT VERSION()")
	if err != nil {
		return "", fmt.Errorf("flushd: server version: %w", err)
	}
	defer rows.Close()
	var v string
	if !rows.Next() {
		if err := rows.Err(); err != nil {
			return "", fmt.Errorf("flushd: server version: %w", err)
		}
		return "", fmt.Errorf("flushd: server version: no row")
	}
	if err := rows.Scan(&v); err != nil {
		return "", fmt.Errorf("flushd: server version: %w", err)
	}
	return v, rows.Err()
}

// LockFirstFor reports whether db's server needs Options.LockFirst: its
// ROLLBACK does not undo an UPDATE of a transaction. go-mysql-server (the
// demo's embedded MySQL; @@version_comment "Dolt") leaves part of a
// rolled-back UPDATE … JOIN JSON_TABLE in place (TestLockFirstEmbedded).
func LockFirstFor(ctx context.Context, db DB) (bool, error) {
	rows, err := db.QueryContext(ctx, "SELECT @@version_comment")
	if err != nil {
		return false, fmt.Errorf("flushd: version comment: %w", err)
	}
	defer rows.Close()
	var c sql.NullString
	if rows.Next() {
		if err := rows.Scan(&c); err != nil {
			return false, fmt.Errorf("flushd: version comment: %w", err)
		}
	}
	if err := rows.Err(); err != nil {
		return false, fmt.Errorf("flushd: version comment: %w", err)
	}
	return strings.Contains(strings.ToLower(c.String), "dolt"), nil
}
