package testenv

import (
	"context"
	"testing"
)

func TestMySQLMigrated(t *testing.T) {
	db := MySQL(t)
	var n int
	if err := db.QueryRowContext(context.Background(), "SELECT COUNT(*) FROM message_read_record").Scan(&n); err != nil {
		t.Fatalf("query migrated table: %v", err)
	}
	if n != 0 {
		t.Errorf("fresh message_read_record has %d rows; want 0", n)
	}
}
