package dashboard

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/RoaringBitmap/roaring/v2"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/idmap"
)

// TestDepartmentsColdStart: after a restart the corp's department tree
// is not cached and the directory is slow (held here): the first view
// answers within deptWait plus a margin with loading true and no rows,
// instead of waiting; once the directory answers, the next view has the
// departments.
func TestDepartmentsColdStart(t *testing.T) {
	const deptWait = time.Second // progress waits this long for a first tree
	f := newFixture(t)
	hold := &heldDirectory{Mapper: f.mapper, open: make(chan struct{})} // the directory load blocks until open
	f.dirUsed = hold
	f.rewire(t, func(*deps) {})
	held := true
	defer func() {
		if held {
			close(hold.open)
		}
	}()
	type view struct {
		Departments []deptJSON
		Loading     bool
	}
	get := func() (view, time.Duration) {
		start := time.Now()
		w := f.ok(t, "GET", "/api/v1/messages/hello/departments")
		var v view
		if err := json.Unmarshal(w.Body.Bytes(), &v); err != nil {
			t.Fatal(err)
		}
		return v, time.Since(start)
	}
	v, took := get()
	if took > deptWait+500*time.Millisecond || !v.Loading || len(v.Departments) != 0 {
		t.Errorf("first view with the directory held: loading %v, %d departments after %s; want loading, none, within %s", v.Loading, len(v.Departments), took, deptWait)
	}
	close(hold.open)
	held = false
	deadline := time.Now().Add(5 * time.Second)
	for {
		v, _ = get()
		if !v.Loading {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("still loading 5 s after the directory answered")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if len(v.Departments) == 0 {
		t.Error("no departments once the directory answered")
	}
}

// heldDirectory is the directory whose department reads wait until open
// is closed (a slow directory).
type heldDirectory struct {
	*idmap.Mapper
	open chan struct{}
}

func (h *heldDirectory) Departments(ctx context.Context, corp string) ([]yidu.Department, error) {
	select {
	case <-h.open:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return h.Mapper.Departments(ctx, corp)
}

func (h *heldDirectory) DepartmentMemberSets(ctx context.Context, corp string) (map[int64]*roaring.Bitmap, error) {
	select {
	case <-h.open:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return h.Mapper.DepartmentMemberSets(ctx, corp)
}
