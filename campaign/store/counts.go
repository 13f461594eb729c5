package store

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/yidu-io/yidu"
)

// countMemo keeps, for the length of one act, how many people each
// audience reaches: a notice posted for approval is counted when it is
// decided whether it needs approval and checked when it is kept, one
// expansion of the directory for both (issue 47).
type countMemo struct {
	mu sync.Mutex
	n  map[string]uint64
}

type countMemoKey struct{}

// RememberCounts returns ctx in which the store counts each audience
// once (ctx itself when it remembers already): for one act, whose
// audience cannot change within it.
func RememberCounts(ctx context.Context) context.Context {
	if _, ok := ctx.Value(countMemoKey{}).(*countMemo); ok {
		return ctx
	}
	return context.WithValue(ctx, countMemoKey{}, &countMemo{n: map[string]uint64{}})
}

// Recipients is how many people au reaches in corp now; known is false
// without a Directory (nothing is counted).
func (s *Store) Recipients(ctx context.Context, corp string, au yidu.Audience) (count uint64, known bool, err error) {
	if s.dir == nil {
		return 0, false, nil
	}
	n, err := s.count(ctx, corp, au)
	if err != nil {
		return 0, false, fmt.Errorf("campaign: count recipients: %w", err)
	}
	return n, true, nil
}

// count is how many people au of corp reaches now, from ctx's memory
// when it remembers it.
func (s *Store) count(ctx context.Context, corp string, au yidu.Audience) (uint64, error) {
	m, _ := ctx.Value(countMemoKey{}).(*countMemo)
	key := ""
	if m != nil {
		if b, err := json.Marshal(au); err == nil {
			key = corp + "\x00" + string(b)
			m.mu.Lock()
			n, ok := m.n[key]
			m.mu.Unlock()
			if ok {
				return n, nil
			}
		}
	}
	x, err := s.dir.Expand(ctx, corp, au)
	if err != nil {
		return 0, fmt.Errorf("campaign: expand audience: %w", err)
	}
	n := x.Recipients.GetCardinality()
	if key != "" {
		m.mu.Lock()
		m.n[key] = n
		m.mu.Unlock()
	}
	return n, nil
}
