package process

import (
	"context"

	"github.com/yidu-io/yidu/access"
	"github.com/yidu-io/yidu/attachment"
	"github.com/yidu-io/yidu/attachment/s3"
	"github.com/yidu-io/yidu/audit"
	"github.com/yidu-io/yidu/bitmap"
	"github.com/yidu-io/yidu/callback"
	"github.com/yidu-io/yidu/campaign"
	"github.com/yidu-io/yidu/campaign/loops"
	"github.com/yidu-io/yidu/campaign/store"
	"github.com/yidu-io/yidu/dashboard"
	"github.com/yidu-io/yidu/delta"
	"github.com/yidu-io/yidu/flushd"
	"github.com/yidu-io/yidu/idmap"
	"github.com/yidu-io/yidu/notice"
	"github.com/yidu-io/yidu/page"
	"github.com/yidu-io/yidu/progress"
	"github.com/yidu-io/yidu/reconcile"
	"github.com/yidu-io/yidu/tracker"
	"github.com/yidu-io/yidu/wecom"
)

// The providers satisfy the interfaces their consumers declare; checked
// here so that no provider imports a consumer.
var (
	_ callback.ReadRecorder   = (*bitmap.Recorder)(nil)
	_ callback.Deduper        = (*callback.RedisDedup)(nil)
	_ callback.ContactApplier = (*idmap.Mapper)(nil)
	_ callback.OAuth          = (*wecom.OAuth)(nil)
	_ bitmap.UIDLookup        = (*idmap.Mapper)(nil)
	_ bitmap.MessageLoader    = (*tracker.Registry)(nil)
	_ bitmap.Publisher        = (*delta.Producer)(nil)
	_ bitmap.Publisher        = (*delta.Spool)(nil)
	_ tracker.Directory       = (*idmap.Mapper)(nil)
	_ tracker.Store           = (*bitmap.Store)(nil)
	_ tracker.Sender          = (*wecom.Sender)(nil)
	_ dashboard.Identities    = (*access.Identities)(nil)
	_ dashboard.Campaign      = (*campaign.Service)(nil)
	_ dashboard.Progress      = (*progress.Progress)(nil)
	_ progress.Archive        = (*tracker.Registry)(nil)
	_ progress.Catalog        = (*tracker.Registry)(nil)
	_ progress.Sends          = (*tracker.Registry)(nil)
	_ progress.History        = (*tracker.Registry)(nil)
	_ progress.Bitmaps        = (*bitmap.Store)(nil)
	_ progress.Directory      = (*idmap.Mapper)(nil)
	_ progress.UserDirectory  = (*idmap.Mapper)(nil)
	_ campaign.Registrar      = (*tracker.Registry)(nil)
	_ campaign.Messenger      = (*tracker.Registry)(nil)
	_ flushd.LiveView         = (*bitmap.Healer)(nil)
	_ flushd.Members          = (*idmap.Mapper)(nil)
	_ reconcile.Archive       = (*tracker.Registry)(nil)
	_ reconcile.Bitmaps       = (*bitmap.Store)(nil)
	_ reconcile.Publisher     = (*delta.Producer)(nil)
	// The reading page's (issue 39).
	_ page.Reads   = (*bitmap.Recorder)(nil)
	_ page.Notices = (*notice.Store)(nil)
	_ page.Blobs   = (*attachment.Cache)(nil)
	_ page.Links   = (*attachment.Store)(nil)
	_ page.Auditor = (*audit.MySQL)(nil)
	_ page.Archive = (*tracker.Registry)(nil)
	_ page.Marks   = (*bitmap.Store)(nil)
	_ page.Readers = pageReaders{}
	// Attachments' objects.
	_ attachment.Objects = (*s3.Bucket)(nil)
	// The follow-up round engine's (issue 30).
	_ loops.LiveReads   = (*bitmap.Store)(nil)
	_ loops.RoundSender = (*tracker.Registry)(nil)
	_ loops.People      = (*idmap.Mapper)(nil)
	_ loops.OrgSource   = (*idmap.Mapper)(nil)
	_ loops.Seats       = (*idmap.Mapper)(nil)
	// Standing notices' (issue 51).
	_ loops.Enroller          = (*tracker.Registry)(nil)
	_ loops.StandingDirectory = (*idmap.Mapper)(nil)
	_ loops.Joiners           = (*tracker.Registry)(nil)
)

// The compose page's directory endpoints read idmap's Index and Expand,
// through audienceDirectory.
var (
	_ campaign.Picking        = audienceDirectory{}
	_ campaign.DirectoryIndex = (*idmap.Index)(nil)
)

// audienceDirectory is idmap.Mapper as campaign's Picking: its Index as
// campaign's DirectoryIndex, so campaign imports no idmap. The Mapper's other methods (UserIDs, Users, …) are promoted.
type audienceDirectory struct{ *idmap.Mapper }

// DirectoryIndex returns the Mapper's Index of corpID.
func (a audienceDirectory) DirectoryIndex(ctx context.Context, corpID string) (campaign.DirectoryIndex, error) {
	idx, err := a.Index(ctx, corpID)
	if err != nil {
		return nil, err
	}
	return idx, nil
}

// campaign checks a notice's audience with the registration's expansion.
var _ store.Directory = (*idmap.Mapper)(nil)
