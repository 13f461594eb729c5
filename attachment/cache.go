package attachment

import (
	"container/list"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"hash"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"golang.org/x/sync/singleflight"

	"github.com/yidu-io/yidu/content"
)

// DefaultCacheBytes is NewCache's bound when it is given none: 1 GiB, some
// fifty attachments of the largest size.
const DefaultCacheBytes = 1 << 30

// Cache keeps attachments' bytes on the serving process's disk, one file
// per hash, so a storm of readers of one PDF reads MySQL once. A file is
// written under a temporary name and renamed only after its hash checked,
// so a crash leaves no half file under a hash's name.
//
// The files together are kept under a bound in bytes: past it the least
// recently opened are removed, and read again from MySQL when asked for.
// A reader that opened a file keeps its bytes until it closes it, removed
// or not.
type Cache struct {
	dir   string
	store *Store
	fill  singleflight.Group
	max   int64

	mu    sync.Mutex
	lru   *list.List // of *cached, most recently opened first
	files map[string]*list.Element
	size  int64
}

// cached is one file of the cache.
type cached struct {
	name string // the hash, hex
	size int64
}

// NewCache returns a cache in dir (created if missing) over store, its
// files kept under max bytes (0: DefaultCacheBytes). What dir holds from
// an earlier run is kept, oldest first out, within the bound.
func NewCache(dir string, store *Store, max int64) (*Cache, error) {
	if dir == "" || store == nil || max < 0 {
		return nil, errors.New("attachment: cache needs a directory, a store and a bound of 0 or more bytes")
	}
	if max == 0 {
		max = DefaultCacheBytes
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("attachment: cache dir: %w", err)
	}
	c := &Cache{dir: dir, store: store, max: max, lru: list.New(), files: map[string]*list.Element{}}
	if err := c.load(); err != nil {
		return nil, err
	}
	return c, nil
}

// load indexes the files an earlier run left, least recently changed
// last, and removes temporary files a crash left behind.
func (c *Cache) load() error {
	ents, err := os.ReadDir(c.dir)
	if err != nil {
		return fmt.Errorf("attachment: cache dir: %w", err)
	}
	type old struct {
		name string
		info fs.FileInfo
	}
	var olds []old
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), ".tmp") {
			_ = os.Remove(filepath.Join(c.dir, e.Name()))
			continue
		}
		if _, err := content.ParseHash(e.Name()); err != nil || !e.Type().IsRegular() {
			continue
		}
		if info, err := e.Info(); err == nil {
			olds = append(olds, old{e.Name(), info})
		}
	}
	slices.SortFunc(olds, func(a, b old) int { return b.info.ModTime().Compare(a.info.ModTime()) })
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, o := range olds {
		c.files[o.name] = c.lru.PushBack(&cached{name: o.name, size: o.info.Size()})
		c.size += o.info.Size()
	}
	c.evict("")
	return nil
}

// Open returns the bytes of hash sum, from disk, filled from MySQL first if
// this process has not cached them (or removed them to keep its bound).
// The caller closes the file.
func (c *Cache) Open(ctx context.Context, sum content.Hash) (*os.File, error) {
	name := sum.String()
	path := filepath.Join(c.dir, name)
	// A file removed between its fill and this open (other fills kept
	// the bound) is filled again; twice is the most a storm of distinct
	// attachments larger than the bound can make it.
	for try := 0; ; try++ {
		if c.touch(name) {
			if f, err := os.Open(path); err == nil {
				return f, nil
			}
			c.forget(name)
		}
		_, err, _ := c.fill.Do(name, func() (any, error) { return nil, c.fillFile(ctx, sum, path) })
		if err != nil {
			return nil, err
		}
		f, err := os.Open(path)
		if err == nil || try == 2 {
			if err != nil {
				return nil, fmt.Errorf("attachment: cache %s: %w", sum, err)
			}
			return f, nil
		}
	}
}

// fillFile writes sum's bytes from MySQL to path and counts them in.
func (c *Cache) fillFile(ctx context.Context, sum content.Hash, path string) error {
	name := sum.String()
	if info, err := os.Stat(path); err == nil {
		c.add(name, info.Size())
		return nil
	}
	tmp, err := os.CreateTemp(c.dir, name+".*.tmp")
	if err != nil {
		return fmt.Errorf("attachment: cache %s: %w", sum, err)
	}
	defer os.Remove(tmp.Name())
	b, err := c.store.WriteBlob(context.WithoutCancel(ctx), sum, tmp)
	if err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("attachment: cache %s: %w", sum, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("attachment: cache %s: %w", sum, err)
	}
	c.add(name, b.Size)
	return nil
}

// touch marks name the most recently opened; false if it is not cached.
func (c *Cache) touch(name string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.files[name]
	if ok {
		c.lru.MoveToFront(e)
	}
	return ok
}

// forget drops name from the index (its file is gone).
func (c *Cache) forget(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.files[name]; ok {
		c.size -= e.Value.(*cached).size
		c.lru.Remove(e)
		delete(c.files, name)
	}
}

// add counts in name's file, just written, and keeps the bound by
// removing the least recently opened others.
func (c *Cache) add(name string, size int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.files[name]; ok {
		c.lru.MoveToFront(e)
		return
	}
	c.files[name] = c.lru.PushFront(&cached{name: name, size: size})
	c.size += size
	c.evict(name)
}

// evict removes the least recently opened files but keep until the
// cache is within its bound. c.mu is held.
func (c *Cache) evict(keep string) {
	for c.size > c.max {
		e := c.lru.Back()
		if e == nil {
			return
		}
		f := e.Value.(*cached)
		if f.name == keep {
			if e = e.Prev(); e == nil {
				return // keep alone is over the bound: served, then the next fill removes it
			}
			f = e.Value.(*cached)
		}
		_ = os.Remove(filepath.Join(c.dir, f.name))
		c.size -= f.size
		c.lru.Remove(e)
		delete(c.files, f.name)
	}
}

// Size is the bytes the cache's files hold now.
func (c *Cache) Size() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.size
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
