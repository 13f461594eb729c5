package process

import (
	"fmt"
	"time"

	"github.com/yidu-io/yidu/access"
	"github.com/yidu-io/yidu/attachment"
	"github.com/yidu-io/yidu/campaign"
	"github.com/yidu-io/yidu/campaign/cards"
	"github.com/yidu-io/yidu/campaign/loops"
	"github.com/yidu-io/yidu/campaign/store"
	"github.com/yidu-io/yidu/dashboard"
	"github.com/yidu-io/yidu/internal/webedge"
	"github.com/yidu-io/yidu/notice"
	"github.com/yidu-io/yidu/page"
	"github.com/yidu-io/yidu/progress"
)

// noticeWing is the notice side of this process, built once
// (Main.notices): the dashboard's acts and the receiver's approval card
// presses are decided by the same campaign.Service, over the same
// store, versions and access; the loops (the Runner, the follow-up
// rounds, the standing notices, the card retries) run with the
// dashboard role only (startNoticeLoops).
type noticeWing struct {
	svc       *campaign.Service
	store     *store.Store
	acc       *access.Access
	ids       *access.Identities
	prog      *progress.Progress
	atts      *attachment.Store
	versions  *notice.Store
	published announcing
	cards     *cards.Notifier
	rounds    *loops.Rounds
	standing  *loops.StandingLoop
	wecom     *dashboard.WeComLogin
}

// notices builds the notice wing the first time it is asked for and
// returns it after.
func (m *Main) notices() (*noticeWing, error) {
	if m.wing != nil {
		return m.wing, nil
	}
	w, err := m.buildNotices()
	if err != nil {
		return nil, err
	}
	m.wing = w
	return w, nil
}

func (m *Main) buildNotices() (*noticeWing, error) {
	cfg, log := m.Config, m.Logger
	w := &noticeWing{}
	var err error
	if w.store, err = store.New(m.DB, store.Options{Directory: m.Mapper, Apps: DomainApps(cfg.Apps), Logger: log, Registerer: m.Registry,
		Evidence: m.evidenceLog()}); err != nil {
		return nil, fmt.Errorf("campaign: %w", err)
	}
	if w.atts, err = attachments(cfg, m.DB, log); err != nil {
		return nil, err
	}
	nopts := notice.Options{Logger: log}
	if m.Ledger != nil {
		nopts.Ledger = m.Ledger
	}
	if w.versions, err = notice.New(m.DB, w.atts, nopts); err != nil {
		return nil, err
	}
	// Campaign publishes versions through published: every receiver's
	// reading page sees a new version from its next request (issue 46).
	w.published = announcing{Store: w.versions, current: page.NewCurrentVersions(m.Redis, cfg.Redis.Prefix), log: log}
	if w.acc, err = access.New(access.Config{Roles: accessRoles(cfg.Dashboard.Roles), LeadersSee: cfg.Dashboard.SeeLeaders(), Approvers: namedApprovers(cfg)}, m.Mapper, time.Now); err != nil {
		return nil, err
	}
	w.wecom = weComLogin(cfg, w.acc, m)
	idOpts := IdentityOptions(cfg)
	// Shared by every replica, kept across restarts.
	idOpts.Sessions = webedge.DashboardSessions(m.Redis, cfg.Redis.Prefix)
	if w.wecom != nil {
		idOpts.WeCom = w.acc // WeCom members' sessions resolve while sign-in with WeCom is on
	}
	if w.ids, err = access.NewIdentities(idOpts); err != nil {
		return nil, err
	}
	// progress answers every number within the caller's View; campaign
	// decides every act (docs/architecture.md).
	if w.prog, err = progress.New(m.Tracker, m.Store, progress.Options{Logger: log, Directory: m.Mapper, History: m.Tracker, Viewer: w.acc}); err != nil {
		return nil, err
	}
	w.rounds = followUpRounds(m, cfg, log)
	w.standing = standingLoop(m, cfg, w.published, log)
	w.cards = approvalCards(cfg, m.wecomSender)
	if w.svc, err = m.noticeService(w); err != nil {
		return nil, err
	}
	// The rounds ask the notice service's gate before each round (issue
	// 46): a notice not approved waits.
	w.rounds.Gate = w.svc.RoundGate
	return w, nil
}

// noticeService is the one campaign.Service of w.
func (m *Main) noticeService(w *noticeWing) (*campaign.Service, error) {
	cfg := m.Config
	// Reminders and recalls are claimed in MySQL, so replicas act once
	// (issue 37).
	reminders, err := store.NewReminderLog(m.DB, "", 0, time.Now, m.Logger)
	if err != nil {
		return nil, fmt.Errorf("campaign: %w", err)
	}
	reminders.WithEvidence(m.evidenceLog())
	o := campaign.Options{Standing: w.standing, Rounds: w.rounds, Messenger: m.Tracker, Registrar: m.Tracker,
		Scope: w.acc, Audiences: w.acc, Members: w.acc, Versions: w.published, Acknowledgements: m.Tracker,
		ReadingPage: readingPageURL(cfg.Receiver.PublicURL), Reminders: reminders, Readers: w.prog,
		RemindInterval: cfg.Dashboard.RemindInterval.D(), Picking: audienceDirectory{m.Mapper},
		Authors: authors{ids: w.ids, acc: w.acc}, Logger: m.Logger, Messages: m.Tracker,
		Templates: store.NewTemplates(m.DB, DomainApps(cfg.Apps), time.Now), Files: w.atts}
	if w.cards != nil {
		o.Notify = w.cards
	}
	return campaign.New(w.store, o), nil
}
