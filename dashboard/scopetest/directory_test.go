package scopetest

import (
	"context"

	"github.com/yidu-io/yidu/access"
	"github.com/yidu-io/yidu/bitmap"
	"github.com/yidu-io/yidu/campaign"
	"github.com/yidu-io/yidu/campaign/store"
	"github.com/yidu-io/yidu/dashboard"
	"github.com/yidu-io/yidu/idmap"
	"github.com/yidu-io/yidu/progress"
	"github.com/yidu-io/yidu/tracker"
)

// directory is the Mapper as campaign's Picking, as cmd wires it
// (process.audienceDirectory): its Index as a campaign.DirectoryIndex.
type directory struct{ *idmap.Mapper }

func (d directory) DirectoryIndex(ctx context.Context, corpID string) (campaign.DirectoryIndex, error) {
	idx, err := d.Index(ctx, corpID)
	if err != nil {
		return nil, err
	}
	return idx, nil
}

var _ campaign.Picking = directory{}

// deps are the dashboard's Options and what cmd builds its three
// services from (cmd/internal/process/dashboard.go).
type deps struct {
	dashboard.Options
	Tokens   []access.Token
	Users    []access.User
	Sessions access.SessionStore
	// Access is whom scoped principals see; WeCom members' sessions
	// resolve with it while Options.WeCom is set.
	Access *access.Access
	Ledger campaign.ReminderLog
	// Campaigns and FollowUps are campaign's (campaign.New's store,
	// Rounds).
	Campaigns *store.Store
	FollowUps campaign.Policies
}

// newServer builds access's identities, progress and campaign over the
// real tracker, bitmaps and directory as cmd does, and the dashboard
// over them.
func newServer(reg *tracker.Registry, store *bitmap.Store, mapper *idmap.Mapper, d deps) (*dashboard.Server, error) {
	idOpts := access.IdentityOptions{Tokens: d.Tokens, Users: d.Users, Sessions: d.Sessions, Now: d.Now}
	if d.WeCom != nil {
		idOpts.WeCom = d.Access
	}
	ids, err := access.NewIdentities(idOpts)
	if err != nil {
		return nil, err
	}
	prog, err := progress.New(reg, store, progress.Options{Directory: mapper, History: reg, Viewer: d.Access, Now: d.Now})
	if err != nil {
		return nil, err
	}
	acts := campaign.New(d.Campaigns, campaign.Options{Rounds: d.FollowUps, Messenger: reg, Registrar: reg,
		Scope: d.Access, Audiences: d.Access, Reminders: d.Ledger, Readers: prog, Picking: directory{mapper}, Now: d.Now})
	return dashboard.New(ids, acts, prog, d.Options)
}
