package process

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/redis/go-redis/v9"
	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/access"
	"github.com/yidu-io/yidu/attachment"
	"github.com/yidu-io/yidu/audit"
	"github.com/yidu-io/yidu/bitmap"
	"github.com/yidu-io/yidu/cmd/internal/config"
	"github.com/yidu-io/yidu/idmap"
	"github.com/yidu-io/yidu/internal/clientip"
	"github.com/yidu-io/yidu/notice"
	"github.com/yidu-io/yidu/page"
)

// pageReaders answers the reading page's who-is-it over the directory
// and the recipients: Redis's bitmap first (one round trip), MySQL when
// Redis lacks the message or is down.
type pageReaders struct {
	ids    *idmap.Mapper
	store  *bitmap.Store
	loader bitmap.MessageLoader
}

// Reader is who userID is (idmap.Mapper.Member): from idmap's roster
// (memory, current to idmap.RosterCheck) unless fresh, else MySQL.
func (p pageReaders) Reader(ctx context.Context, corp, userID string, fresh bool) (page.Reader, bool, error) {
	uid, name, active, found, err := p.ids.Member(ctx, corp, userID, fresh)
	return page.Reader{UID: uid, Name: name, Left: found && !active}, found, err
}

// NoticeApp names the app of msgID: the message's meta in Redis, MySQL
// when Redis lacks it (the page remembers it: a notice keeps its app).
func (p pageReaders) NoticeApp(ctx context.Context, corp, msgID string) (string, bool, error) {
	if m, found, err := p.store.MessageMeta(ctx, corp, msgID); err == nil && found && m.App != "" {
		return m.App, true, nil
	}
	g, ok := p.loader.(interface {
		GetMessage(ctx context.Context, corps []string, msgID string) (yidu.Message, bool, error)
	})
	if !ok {
		return "", false, nil
	}
	m, found, err := g.GetMessage(ctx, []string{corp}, msgID)
	if err != nil {
		return "", false, fmt.Errorf("page: app of %s: %w", msgID, err)
	}
	return m.App, found && m.App != "", nil
}

func (p pageReaders) QueueRecipient(ctx context.Context, pipe redis.Pipeliner, corp, msgID string, uid uint32) func() (bool, error) {
	inRedis := p.store.QueueRecipient(ctx, pipe, corp, msgID, uid)
	return func() (bool, error) {
		if is, found, err := inRedis(); err == nil && found {
			return is, nil
		}
		got, err := p.loader.RecipientOf(ctx, corp, uid, []string{msgID})
		if err != nil {
			return false, fmt.Errorf("page: recipient of %s: %w", msgID, err)
		}
		return len(got) == 1, nil
	}
}

// readingPage builds the reading page of notices with content (issue 39)
// on the receiver's pool; nil when receiver.public_url is not set.
func (m *Main) readingPage(cfg config.Config, ids *idmap.Mapper, loader bitmap.MessageLoader, oauth page.OAuth, log *slog.Logger) (*page.Server, error) {
	if cfg.Receiver.PublicURL == "" || oauth == nil {
		return nil, nil
	}
	proxies, err := clientip.ParseProxies(cfg.Receiver.TrustedProxies)
	if err != nil {
		return nil, err
	}
	db := cmp.Or(m.ReceiverDB, m.DB)
	atts, err := attachments(cfg, db, log)
	if err != nil {
		return nil, err
	}
	// Cached by hash under data_dir (the receiver's local state, like the
	// spool), within receiver.attachment_cache_bytes; a lost or evicted
	// file is filled again from MySQL.
	cacheMax := cfg.Receiver.AttachmentCacheBytes
	cache, err := attachment.NewCache(filepath.Join(cmp.Or(cfg.DataDir, os.TempDir()), "attachments"), atts, cacheMax)
	if err != nil {
		// A data_dir the receiver may not write (spool off) must not stop
		// it: the cache is only a cache.
		log.Warn("reading page: attachment cache in data_dir refused, using the temporary directory", "err", err)
		if cache, err = attachment.NewCache(filepath.Join(os.TempDir(), "yidu-attachments"), atts, cacheMax); err != nil {
			return nil, err
		}
	}
	notices, err := notice.New(db, atts, notice.Options{Logger: log})
	if err != nil {
		return nil, err
	}
	archive, ok := loader.(page.Archive)
	if !ok {
		return nil, fmt.Errorf("reading page: the message loader %T does not read page_signals", loader)
	}
	// 我的记录 (issue 40): the member's own notices and evidence.
	records, err := newEvidence(db, notices, m.Ledger, m.Config.Ledger, log)
	if err != nil {
		return nil, err
	}
	var apps []page.App
	for _, a := range cfg.Apps {
		apps = append(apps, page.App{Name: a.Name, CorpID: a.CorpID, AgentID: a.AgentID, ViewKey: page.ViewKey(a.Name, a.Secret, a.EncodingAESKey)})
	}
	return page.New(pageReaders{ids: ids, store: m.Store, loader: loader}, notices, cache, m.Recorder, oauth, audit.NewMySQL(db), page.Options{
		PublicURL: cfg.Receiver.PublicURL, Apps: apps,
		Endpoints: access.Endpoints{
			OAuthBase: cmp.Or(cfg.WeCom.OAuthBase, access.DefaultEndpoints.OAuthBase),
			LoginBase: cmp.Or(cfg.WeCom.LoginBase, access.DefaultEndpoints.LoginBase),
		},
		States: access.NewStates(m.Redis, cfg.Redis.Prefix), Redis: m.Redis, Prefix: cfg.Redis.Prefix, Archive: archive, Logger: log,
		Registerer: m.Registry, Records: records, TrustedProxies: proxies,
		SignInRate: cfg.Receiver.SignInRate, ClientSignInRate: cfg.Receiver.SignInClientRate, FailedSignInRate: cfg.Receiver.SignInFailureRate,
		Sessions: m.PageSessions, SessionTTL: cfg.Receiver.SessionTTL.D(), Current: page.NewCurrentVersions(m.Redis, cfg.Redis.Prefix),
		Links: attachmentLinks(atts), Marks: m.Store,
	})
}

// pageFront sends the reading pages' requests to pages and the rest to
// next: under /r/, a request with a signature is a tracked link (the
// receiver's), one without is the reading page's.
func pageFront(pages, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Most of the storm's requests have no query: parsed only when
		// there is one.
		if strings.HasPrefix(r.URL.Path, "/r/") && (r.URL.RawQuery == "" || !r.URL.Query().Has("sig")) {
			pages.ServeHTTP(w, r)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// readingPageURL returns the URL of a notice's reading page on the
// receiver, nil when receiver.public_url is not set (no page).
func readingPageURL(public string) func(app, msgID string) string {
	if public == "" {
		return nil
	}
	base := strings.TrimRight(public, "/")
	return func(app, msgID string) string {
		return base + "/r/" + url.PathEscape(app) + "/" + url.PathEscape(msgID)
	}
}

// announcing is the notice.Store campaign publishes versions through:
// each version stored is announced to the reading pages' current version
// (page.CurrentVersions), which every receiver reads on each request, so
// an acknowledgement of a version a newer material one replaced is
// refused from the moment the newer one is stored. A failed announcement
// is logged; the page heals from MySQL within a minute.
type announcing struct {
	*notice.Store
	current *page.CurrentVersions
	log     *slog.Logger
}

// Create stores version 1 (notice.Store.Create) and announces it.
func (a announcing) Create(ctx context.Context, corp, msgid string, v notice.Version, set notice.Settings, by string) (notice.Version, error) {
	out, err := a.Store.Create(ctx, corp, msgid, v, set, by)
	if err == nil {
		a.announce(ctx, corp, msgid)
	}
	return out, err
}

// Update stores version N+1 (notice.Store.Update) and announces it; a
// replay that made none announces again (a failure before is healed).
func (a announcing) Update(ctx context.Context, corp, msgid string, v notice.Version, reacknowledge bool, by string) (notice.Version, bool, error) {
	out, made, err := a.Store.Update(ctx, corp, msgid, v, reacknowledge, by)
	if err == nil {
		a.announce(ctx, corp, msgid)
	}
	return out, made, err
}

func (a announcing) announce(ctx context.Context, corp, msgid string) {
	all, err := a.Store.List(ctx, corp, msgid)
	if err == nil && len(all) > 0 {
		err = a.current.Published(ctx, corp, msgid, all[len(all)-1].N, notice.Material(all))
	}
	if err != nil {
		a.log.ErrorContext(ctx, "reading page: new version not announced (healed from MySQL within a minute)", "msgid", msgid, "err", err)
	}
}
