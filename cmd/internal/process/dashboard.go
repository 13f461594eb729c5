package process

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/access"
	"github.com/yidu-io/yidu/audit"
	"github.com/yidu-io/yidu/campaign/loops"
	"github.com/yidu-io/yidu/cmd/internal/config"
	"github.com/yidu-io/yidu/dashboard"
	"github.com/yidu-io/yidu/internal/loop"
	"github.com/yidu-io/yidu/wecom"
)

// startDashboard starts the notice loops over the process's notice
// wing (notices), builds the dashboard over its service, and serves it.
func (m *Main) startDashboard(ctx context.Context) error {
	w, err := m.notices()
	if err != nil {
		return fmt.Errorf("dashboard: %w", err)
	}
	opts, err := m.dashboardOptions(w)
	if err != nil {
		return fmt.Errorf("dashboard: %w", err)
	}
	if err := m.startNoticeLoops(ctx, w); err != nil {
		return err
	}
	d, err := dashboard.New(w.ids, w.svc, w.prog, opts)
	if err != nil {
		return fmt.Errorf("dashboard: %w", err)
	}
	m.Dashboard = d
	// Roles are configuration: a start with other grants than the last
	// one is recorded as role_change events (access.RecordRoleChanges).
	if n, err := access.RecordRoleChanges(ctx, m.DB, audit.NewMySQL(m.DB), roleHolders(m.Config.Dashboard), time.Now()); err != nil {
		m.Logger.Error("dashboard: role changes not audited", "err", err)
	} else if n > 0 {
		m.Logger.Info("dashboard: role changes audited", "changes", n)
	}
	if m.DashboardAddr, err = m.serveRole("dashboard", dashboardServer(), m.Config.Dashboard.Listen, d.Routes(), m.readiness(m.DB, false)); err != nil {
		return err
	}
	return nil
}

// dashboardOptions maps the configuration and w onto the dashboard's
// options.
func (m *Main) dashboardOptions(w *noticeWing) (dashboard.Options, error) {
	cfg := m.Config
	opts := DashboardOptions(cfg)
	proxies, err := cfg.Dashboard.Proxies()
	if err != nil {
		return opts, err
	}
	opts.TrustedProxies = proxies
	opts.WeCom = w.wecom
	opts.Audit, opts.AuditLog = audit.NewMySQL(m.DB), audit.NewMySQL(m.DB)
	opts.Logger, opts.Registerer = m.Logger, m.Registry
	opts.Attachments = w.atts
	// Evidence records (issue 40) with their ledger proofs.
	if opts.Evidence, err = newEvidence(m.DB, w.versions, m.Ledger, cfg.Ledger, m.Logger); err != nil {
		return opts, err
	}
	if m.Ledger != nil {
		opts.EvidenceLog = m.Ledger
	}
	opts.Standing = w.standing
	return opts, nil
}

// startNoticeLoops starts w's loops until Close: the scheduled-notice
// Runner, the follow-up rounds, the standing notices, the approval card
// retries and the receipts. Each round, and each scheduled notice, runs
// under its own recover and backoff, counted in yidu_loop_* (issue 46):
// one poisoned notice never takes the process down nor stops the others.
func (m *Main) startNoticeLoops(ctx context.Context, w *noticeWing) error {
	var err error
	guard := func(name string, log *slog.Logger, now func() time.Time) *loop.Guard {
		g, gerr := m.loopGuard(name, log, now)
		err = cmp.Or(err, gerr)
		return g
	}
	w.rounds.Guard = guard("rounds", w.rounds.Log, w.rounds.Now)
	runnerGuard := guard("runner", m.Logger, time.Now)
	w.standing.Guard = guard("standing", w.standing.Log, time.Now)
	cardGuard := guard("approval_cards", m.Logger, time.Now)
	receiptGuard := guard("receipts", m.Logger, time.Now)
	if err != nil {
		return fmt.Errorf("dashboard: %w", err)
	}
	// A draft's or scheduled notice's full text is published as version 1
	// by the Runner when it is sent; at its time a scheduled notice is
	// checked against its author's sender audience and its approval as
	// they are then (issue 41).
	ropts := loops.RunnerOptions{MaxLateness: m.Config.Dashboard.MaxLateness.D(), Publisher: w.published, Check: w.svc.AtItsTime, Guard: runnerGuard}
	if w.cards != nil {
		ropts.OnHeld = w.cards.Held
	}
	runner, err := loops.NewRunner(w.store, m.Tracker, ropts)
	if err != nil {
		return fmt.Errorf("campaign: %w", err)
	}
	cctx, ccancel := context.WithCancel(context.WithoutCancel(ctx))
	m.campaignCancel, m.campaignDone = ccancel, make(chan struct{})
	go func() {
		defer close(m.campaignDone)
		var wg sync.WaitGroup
		wg.Go(func() { _ = w.rounds.Run(cctx, 2*time.Second) })
		wg.Go(func() { _ = w.standing.Run(cctx, 2*time.Second) })
		wg.Go(func() { retryApprovalCards(cctx, w.svc, cardGuard, 5*time.Second) })
		wg.Go(func() { receiptLoop(cctx, m.Tracker, receiptGuard, time.Second) })
		_ = runner.Run(cctx)
		wg.Wait()
	}()
	return nil
}

// roleHolders are every grant the dashboard configuration makes: users',
// tokens' and dashboard.roles[]'s (an entry dashboard.New would refuse
// holds none).
func roleHolders(d config.Dashboard) []access.Holder {
	var out []access.Holder
	add := func(kind access.Kind, name string, corps []string, cg config.Grant) {
		gs, all, err := access.ConfigGrants(corps, yidu.Role(cg.Role), cg.Corp, cg.Apps, cg.Departments)
		if err != nil {
			return
		}
		for i := range gs {
			gs[i].Scope.Audience = cg.Scope().Audience
		}
		if all {
			out = append(out, access.Holder{Kind: kind, Name: name, AllCorps: true})
		}
		for _, g := range gs {
			out = append(out, access.Holder{Kind: kind, Name: name, Grant: g})
		}
	}
	for _, u := range d.Users {
		add(access.KindUser, u.Name, u.Corps, u.Grant)
	}
	for _, t := range d.Tokens {
		add(access.KindToken, t.Name, t.Corps, t.Grant)
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
		return access.RoleGrant{UserID: r.UserID, Grant: accessGrant(r.Grant)}
	})
}

// accessGrant is a configured grant as package access takes it.
func accessGrant(g config.Grant) access.Grant {
	return access.Grant{Role: yidu.Role(g.Role), Scope: g.Scope()}
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
		return access.Token{Name: t.Name, Token: t.Token, Corps: t.Corps, Grant: accessGrant(t.Grant)}
	})
}

func dashboardUsers(us []config.User) []access.User {
	return each(us, func(u config.User) access.User {
		return access.User{Name: u.Name, PasswordHash: u.PasswordHash, Corps: u.Corps, Grant: accessGrant(u.Grant)}
	})
}
