package campaign

import (
	"context"
	"sync"
)

// actMemo keeps, for the length of one act (a Post), whether the caller
// may address an audience of an app (access's CheckAudience, which
// expands the audience against the caller's limit): a notice posted for
// approval is checked when it is prepared, composed and asked for, one
// question, not three (issue 47). How many people it reaches is the
// store's to remember (store.RememberCounts).
type actMemo struct {
	mu     sync.Mutex
	inside map[string]error
}

type actMemoKey struct{}

// withActMemo returns ctx carrying a new memo, or ctx itself when it
// carries one already (an act inside another shares the outer's).
func withActMemo(ctx context.Context) context.Context {
	if memoOf(ctx) != nil {
		return ctx
	}
	return context.WithValue(ctx, actMemoKey{}, &actMemo{inside: map[string]error{}})
}

// memoOf is ctx's memo, nil outside an act that keeps one.
func memoOf(ctx context.Context) *actMemo {
	m, _ := ctx.Value(actMemoKey{}).(*actMemo)
	return m
}

// checked returns the remembered answer of key, if any.
func (m *actMemo) checked(key string) (error, bool) {
	if m == nil || key == "" {
		return nil, false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	err, ok := m.inside[key]
	return err, ok
}

func (m *actMemo) check(key string, err error) {
	if m == nil || key == "" {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.inside[key] = err
}
