package flushd

import "fmt"

// Validate checks what flushd alone decides of o without building
// anything: the batch size (0: DefaultBatchSize, at most MaxBatchSize).
// New checks the same; cmd calls Validate on the options it maps from the
// configuration so a bad file is refused before anything starts. Errors
// name the option as the configuration spells it.
func (o Options) Validate() error {
	if o.BatchSize < 0 || o.BatchSize > MaxBatchSize {
		return fmt.Errorf("flushd: batch_size %d must be in 1..%d (0: %d)", o.BatchSize, MaxBatchSize, DefaultBatchSize)
	}
	return nil
}

// Valid reports whether d is a server family flushd knows (mariadb,
// mysql, tidb; spelt in lower case).
func (d Dialect) Valid() bool {
	switch d {
	case DialectMariaDB, DialectMySQL, DialectTiDB:
		return true
	}
	return false
}
