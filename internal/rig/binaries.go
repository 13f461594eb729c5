package rig

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
)

// Binaries builds yidu's commands (github.com/yidu-io/yidu/cmd/<name>)
// into a temporary directory, each at most once however often and from
// however many goroutines it is asked for: a run that starts yidu ten
// times links it once. The zero value is ready; Close removes the
// directory (running binaries stay open).
type Binaries struct {
	mu    sync.Mutex
	dir   string
	built map[string]*build
}

type build struct {
	once sync.Once
	path string
	err  error
}

// Path returns the binary of cmd/<name>, building it on the first call.
// A failed build stays failed: every caller gets its error.
func (b *Binaries) Path(ctx context.Context, name string) (string, error) {
	b.mu.Lock()
	if b.built == nil {
		b.built = map[string]*build{}
	}
	bl, ok := b.built[name]
	if !ok {
		bl = &build{}
		b.built[name] = bl
	}
	b.mu.Unlock()
	bl.once.Do(func() { bl.path, bl.err = b.build(ctx, name) })
	return bl.path, bl.err
}

func (b *Binaries) build(ctx context.Context, name string) (string, error) {
	b.mu.Lock()
	if b.dir == "" {
		dir, err := os.MkdirTemp("", "yidu-rig-")
		if err != nil {
			b.mu.Unlock()
			return "", err
		}
		b.dir = dir
	}
	out := filepath.Join(b.dir, name)
	b.mu.Unlock()
	cmd := exec.CommandContext(ctx, "go", "build", "-o", out, "github.com/yidu-io/yidu/cmd/"+name)
	if msg, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build %s: %w: %s", name, err, msg)
	}
	return out, nil
}

// Close removes the binaries; a later Path builds again.
func (b *Binaries) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	dir := b.dir
	b.dir, b.built = "", nil
	if dir == "" {
		return nil
	}
	return os.RemoveAll(dir)
}
