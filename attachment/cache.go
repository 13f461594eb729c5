package attachment

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"hash"
	"os"
	"path/filepath"

	"golang.org/x/sync/singleflight"

	"github.com/yidu-io/yidu/content"
)

// Cache keeps attachments' bytes on the serving process's disk, one file
// per hash, so a storm of readers of one PDF reads MySQL once. A file is
// written under a temporary name and renamed only after its hash checked,
// so a crash leaves no half file under a hash's name.
type Cache struct {
	dir   string
	store *Store
	fill  singleflight.Group
}

// NewCache returns a cache in dir (created if missing) over store.
func NewCache(dir string, store *Store) (*Cache, error) {
	if dir == "" || store == nil {
		return nil, errors.New("attachment: cache needs a directory and a store")
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("attachment: cache dir: %w", err)
	}
	return &Cache{dir: dir, store: store}, nil
}

// Open returns the bytes of hash sum, from disk, filled from MySQL first if
// this process has not cached them yet. The caller closes the file.
func (c *Cache) Open(ctx context.Context, sum content.Hash) (*os.File, error) {
	path := filepath.Join(c.dir, sum.String())
	if f, err := os.Open(path); err == nil {
		return f, nil
	}
	_, err, _ := c.fill.Do(sum.String(), func() (any, error) {
		if _, err := os.Stat(path); err == nil {
			return nil, nil
		}
		tmp, err := os.CreateTemp(c.dir, sum.String()+".*.tmp")
		if err != nil {
			return nil, fmt.Errorf("attachment: cache %s: %w", sum, err)
		}
		defer os.Remove(tmp.Name())
		if _, err := c.store.WriteBlob(context.WithoutCancel(ctx), sum, tmp); err != nil {
			tmp.Close()
			return nil, err
		}
		if err := tmp.Close(); err != nil {
			return nil, fmt.Errorf("attachment: cache %s: %w", sum, err)
		}
		if err := os.Rename(tmp.Name(), path); err != nil {
			return nil, fmt.Errorf("attachment: cache %s: %w", sum, err)
		}
		return nil, nil
	})
	if err != nil {
		return nil, err
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("attachment: cache %s: %w", sum, err)
	}
	return f, nil
}

// hasher counts what it hashes.
type hasher struct {
	hash.Hash
	n int64
}

func newHasher() *hasher { return &hasher{Hash: sha256.New()} }

func (h *hasher) Write(p []byte) (int, error) {
	h.n += int64(len(p))
	return h.Hash.Write(p)
}
