package process

import (
	"cmp"
	"context"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/access"
	"github.com/yidu-io/yidu/attachment"
	"github.com/yidu-io/yidu/audit"
	"github.com/yidu-io/yidu/campaign"
	"github.com/yidu-io/yidu/cmd/internal/config"
	"github.com/yidu-io/yidu/dashboard"
	"github.com/yidu-io/yidu/notice"
	"github.com/yidu-io/yidu/progress"
	"github.com/yidu-io/yidu/wecom"
)

// startDashboard builds the campaign store, its Runner and the follow-up
// rounds, access and the dashboard, and serves it.
func (m *Main) startDashboard(ctx context.Context) error {
	cfg := m.Config
	log := m.Logger
	proxies, err := cfg.Dashboard.Proxies()
	if err != nil {
		return err
	}
	camps, err := campaign.NewStore(m.DB, campaign.Options{Directory: m.Mapper, Apps: DomainApps(cfg.Apps), Logger: log, Registerer: m.Registry})
	if err != nil {
		return fmt.Errorf("campaign: %w", err)
	}
	atts, err := attachment.New(m.DB, attachment.Options{Logger: log})
	if err != nil {
		return fmt.Errorf("dashboard: %w", err)
	}
	nopts := notice.Options{Logger: log}
	if m.Ledger != nil {
		nopts.Ledger = m.Ledger
	}
	notices, err := notice.New(m.DB, atts, nopts)
	if err != nil {
		return fmt.Errorf("dashboard: %w", err)
	}
	cards := approvalCards(cfg, m.wecomSender)
	rounds := followUpRounds(m, cfg, log)
	acc, err := access.New(access.Config{Roles: accessRoles(cfg.Dashboard.Roles), LeadersSee: cfg.Dashboard.SeeLeaders()}, m.Mapper, time.Now)
	if err != nil {
		return fmt.Errorf("dashboard: %w", err)
	}
	opts := DashboardOptions(cfg)
	opts.WeCom = weComLogin(cfg, acc, m)
	opts.Audit, opts.AuditLog = audit.NewMySQL(m.DB), audit.NewMySQL(m.DB)
	idOpts := IdentityOptions(cfg)
	// Shared by every replica, kept across restarts.
	idOpts.Sessions = access.NewRedisSessions(m.Redis, cfg.Redis.Prefix)
	if opts.WeCom != nil {
		idOpts.WeCom = acc // WeCom members' sessions resolve while sign-in with WeCom is on
	}
	ids, err := access.NewIdentities(idOpts)
	if err != nil {
		return fmt.Errorf("dashboard: %w", err)
	}
	opts.TrustedProxies = proxies
	opts.Logger, opts.Registerer = log, m.Registry
	// Reminders and recalls are claimed in MySQL, so replicas act once
	// (issue 37).
	ledger, err := campaign.NewSQLLedger(m.DB, "", 0, time.Now, log)
	if err != nil {
		return fmt.Errorf("campaign: %w", err)
	}
	opts.Attachments = atts
	// Evidence records (issue 40) with their ledger proofs.
	ev, err := newEvidence(m.DB, notices, m.Ledger, log)
	if err != nil {
		return fmt.Errorf("dashboard: %w", err)
	}
	opts.Evidence = ev
	// progress answers every number within the caller's View; campaign
	// decides every act (docs/architecture.md).
	prog, err := progress.New(m.Tracker, m.Store, progress.Options{Logger: log, Directory: m.Mapper, History: m.Tracker, Viewer: acc})
	if err != nil {
		return fmt.Errorf("dashboard: %w", err)
	}
	sopts := campaign.ServiceOptions{Store: camps, Rounds: rounds, Messenger: m.Tracker, Registrar: m.Tracker,
		Scope: acc, Audiences: acc, Versions: notices, Acknowledgements: m.Tracker, ReadingPage: readingPageURL(cfg.Receiver.PublicURL),
		Ledger: ledger, Readers: prog, RemindInterval: cfg.Dashboard.RemindInterval.D(), Picking: audienceDirectory{m.Mapper},
		Authors: authors{ids: ids, acc: acc}, Logger: log,
		Templates: campaign.NewTemplates(m.DB, DomainApps(cfg.Apps), time.Now).WithFiles(atts)}
	if cards != nil {
		sopts.Notify = cards
	}
	acts := campaign.NewService(sopts)
	// A draft's or scheduled notice's full text is published as version 1
	// by the Runner when it is sent; at its time a scheduled notice is
	// checked against its author's sender audience and its approval as
	// they are then (issue 41).
	ropts := campaign.RunnerOptions{MaxLateness: cfg.Dashboard.MaxLateness.D(), Publisher: notices, Check: acts.AtItsTime}
	if cards != nil {
		ropts.OnHeld = cards.Held
	}
	runner, err := campaign.NewRunner(camps, m.Tracker, ropts)
	if err != nil {
		return fmt.Errorf("campaign: %w", err)
	}
	cctx, ccancel := context.WithCancel(context.WithoutCancel(ctx))
	m.campaignCancel, m.campaignDone = ccancel, make(chan struct{})
	go func() {
		defer close(m.campaignDone)
		roundsDone := make(chan struct{})
		go func() { defer close(roundsDone); _ = rounds.Run(cctx, 2*time.Second) }()
		_ = runner.Run(cctx)
		<-roundsDone
	}()
	d, err := dashboard.New(ids, acts, prog, opts)
	if err != nil {
		return fmt.Errorf("dashboard: %w", err)
	}
	m.Dashboard = d
	// Roles are configuration: a start with other grants than the last
	// one is recorded as role_change events (access.RecordRoleChanges).
	if n, err := access.RecordRoleChanges(ctx, m.DB, audit.NewMySQL(m.DB), roleHolders(cfg.Dashboard), time.Now()); err != nil {
		log.Error("dashboard: role changes not audited", "err", err)
	} else if n > 0 {
		log.Info("dashboard: role changes audited", "changes", n)
	}
	if m.DashboardAddr, err = m.serveRole("dashboard", dashboardServer(), cfg.Dashboard.Listen, d.Routes(), m.readiness(m.DB, false)); err != nil {
		return err
	}
	return nil
}

// roleHolders are every grant the dashboard configuration makes: users',
// tokens' and dashboard.roles[]'s (an entry dashboard.New would refuse
// holds none).
func roleHolders(d config.Dashboard) []access.Holder {
	var out []access.Holder
	add := func(kind access.Kind, name string, corps []string, role, corp string, apps []string, depts []int64, au config.SenderAudience) {
		gs, all, err := access.ConfigGrants(corps, yidu.Role(role), corp, apps, depts)
		if err != nil {
			return
		}
		for i := range gs {
			gs[i].Scope.Audience = senderAudience(au)
		}
		if all {
			out = append(out, access.Holder{Kind: kind, Name: name, AllCorps: true})
		}
		for _, g := range gs {
			out = append(out, access.Holder{Kind: kind, Name: name, Grant: g})
		}
	}
	for _, u := range d.Users {
		add(access.KindUser, u.Name, u.Corps, u.Role, u.Corp, u.Apps, u.Departments, u.Audience)
	}
	for _, t := range d.Tokens {
		add(access.KindToken, t.Name, t.Corps, t.Role, t.Corp, t.Apps, t.Departments, t.Audience)
	}
	for _, r := range accessRoles(d.Roles) {
		out = append(out, access.Holder{Kind: access.KindWeCom, Name: r.UserID, Grant: r.Grant})
	}
	if d.SeeLeaders() {
		out = append(out, access.LeadersHolder())
	}
	return out
}

// accessRoles are dashboard.roles[] as package access takes them.
func accessRoles(rs []config.RoleGrant) []access.RoleGrant {
	return each(rs, func(r config.RoleGrant) access.RoleGrant {
		return access.RoleGrant{UserID: r.UserID, Grant: access.Grant{Role: yidu.Role(r.Role),
			Scope: yidu.Scope{Corp: r.Corp, Apps: r.Apps, Departments: r.Departments,
				Audience: senderAudience(r.Audience)}}}
	})
}

// weComLogin is sign-in with WeCom through dashboard.login_app (issue
// 31); nil when it is off (config.WeComLoginApp).
func weComLogin(cfg config.Config, acc *access.Access, m *Main) *dashboard.WeComLogin {
	app, ok := cfg.WeComLoginApp()
	if !ok {
		return nil
	}
	return &dashboard.WeComLogin{
		CorpID: app.CorpID, AgentID: app.AgentID,
		Endpoints: access.Endpoints{
			OAuthBase: cmp.Or(cfg.WeCom.OAuthBase, access.DefaultEndpoints.OAuthBase),
			LoginBase: cmp.Or(cfg.WeCom.LoginBase, access.DefaultEndpoints.LoginBase),
		},
		Access: acc,
		States: access.NewStates(m.Redis, cfg.Redis.Prefix),
		OAuth:  wecom.NewOAuth(WeComApps([]config.App{app})),
	}
}

// verifyFile serves WeCom's domain verification file (wecom.verify_file,
// 可信域名 → 申请校验域名) at /name, in front of next: WeCom fetches it
// from the root of the trusted domain, which is the receiver's or the
// dashboard's host.
func verifyFile(name string, body []byte, next http.Handler) http.Handler {
	path := "/" + name
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != path || (r.Method != http.MethodGet && r.Method != http.MethodHead) {
			next.ServeHTTP(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		if r.Method == http.MethodGet {
			_, _ = w.Write(body)
		}
	})
}

func dashboardTokens(ts []config.Token) []access.Token {
	return each(ts, func(t config.Token) access.Token {
		return access.Token{Name: t.Name, Token: t.Token, Corps: t.Corps,
			Role: yidu.Role(t.Role), Corp: t.Corp, Apps: t.Apps, Departments: t.Departments, Audience: senderAudience(t.Audience)}
	})
}

func dashboardUsers(us []config.User) []access.User {
	return each(us, func(u config.User) access.User {
		return access.User{Name: u.Name, PasswordHash: u.PasswordHash, Corps: u.Corps,
			Role: yidu.Role(u.Role), Corp: u.Corp, Apps: u.Apps, Departments: u.Departments, Audience: senderAudience(u.Audience)}
	})
}

// senderAudience is a configured audience as yidu takes it (issue 41).
func senderAudience(a config.SenderAudience) yidu.SenderAudience {
	return yidu.SenderAudience{Departments: a.Departments, Tags: a.Tags}
}
