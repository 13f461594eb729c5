// Package migrations holds yidu's MySQL schema as versioned goose
// migrations, embedded in the binary, and runs them.
package migrations

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"io/fs"

	"github.com/pressly/goose/v3"
)

//go:embed *.sql
var files embed.FS

// FS returns the embedded migration files.
func FS() fs.FS { return files }

// NewProvider returns a goose provider over the embedded migrations for db,
// which must be a MySQL or MariaDB connection opened with multiStatements
// off (goose sends one statement at a time).
func NewProvider(db *sql.DB) (*goose.Provider, error) {
	p, err := goose.NewProvider(goose.DialectMySQL, db, files)
	if err != nil {
		return nil, fmt.Errorf("migrations: new provider: %w", err)
	}
	return p, nil
}

// Up applies every pending migration and returns the resulting version.
func Up(ctx context.Context, db *sql.DB) (int64, error) {
	p, err := NewProvider(db)
	if err != nil {
		return 0, err
	}
	if _, err := p.Up(ctx); err != nil {
		return 0, fmt.Errorf("migrations: up: %w", err)
	}
	v, err := p.GetDBVersion(ctx)
	if err != nil {
		return 0, fmt.Errorf("migrations: version: %w", err)
	}
	return v, nil
}
