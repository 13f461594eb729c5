package config

import (
	"fmt"
	"net/netip"
	"time"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/internal/clientip"
)

// Dashboard configures the dashboard and the /api/v1 API.
type Dashboard struct {
	Listen string `yaml:"listen"`
	// Tokens are the API bearer tokens.
	Tokens []Token `yaml:"tokens"`
	// Users may sign in to the page.
	Users []User `yaml:"users"`
	// UsersFile is a YAML file holding more users (a list of the same
	// shape as Users): a Kubernetes Secret mounted as a file, so password
	// hashes stay out of the ConfigMap.
	UsersFile  string   `yaml:"users_file"`
	SessionTTL Duration `yaml:"session_ttl"`
	// TrustedProxies are the networks (CIDR) of the reverse proxies in
	// front of the dashboard, an ingress controller's pods: only their
	// X-Forwarded-For and X-Forwarded-Proto are believed (sign-in rate
	// limits per client address, the Secure cookie behind TLS
	// termination).
	TrustedProxies []string `yaml:"trusted_proxies"`
	// PublicURL is the dashboard as browsers reach it: https makes the
	// session cookie Secure even when TLS ends at an ingress.
	PublicURL string `yaml:"public_url"`
	// RemindInterval is the least time between two reminders of a message.
	RemindInterval Duration `yaml:"remind_interval"`
	// MinReminderDelay is the least time between a send and a follow-up
	// round, and between two rounds (yidu.Policy.Validate).
	MinReminderDelay Duration `yaml:"min_reminder_delay"`
	// MaxStreams bounds the live /events streams of the dashboard (503
	// beyond); MaxStreamsPerPrincipal those of one token or one person
	// (429 beyond). StreamWriteTimeout drops a stream whose event does not
	// reach its client in time (a reader that stopped reading).
	MaxStreams             int      `yaml:"max_streams"`
	MaxStreamsPerPrincipal int      `yaml:"max_streams_per_principal"`
	StreamWriteTimeout     Duration `yaml:"stream_write_timeout"`
	// MaxQueries bounds the heavy queries (recipients, departments,
	// export) running at once, so that flushd keeps MySQL connections of
	// the pool it shares with the dashboard; MaxQueriesPerPrincipal those
	// of one token or person (429 beyond).
	MaxQueries             int `yaml:"max_queries"`
	MaxQueriesPerPrincipal int `yaml:"max_queries_per_principal"`
	// ConfirmOver: above this many recipients the page asks the person
	// to type the count before sending (default 1000).
	ConfirmOver int `yaml:"confirm_over"`
	// MaxLateness: a scheduled notice whose time passed by more than this
	// while yidu was down is held for a person to send or cancel (default
	// 2h); a later one is sent on start and marked late.
	MaxLateness Duration `yaml:"max_lateness"`

	// LoginApp names the app (apps[].name) people sign in to the
	// dashboard through with WeCom (issue 31): its corp's members, as
	// the synced directory has them. Empty: the first app with a secret,
	// when public_url is set; "off": password sign-in only.
	LoginApp string `yaml:"login_app"`
	// Roles grant roles to WeCom members; RolesFile is a YAML file
	// holding more (a list of the same shape), as users_file is.
	Roles     []RoleGrant `yaml:"roles"`
	RolesFile string      `yaml:"roles_file"`
	// LeadersSee makes each department leader, as the synced directory
	// names them (department_leader), a viewer of the subtrees they lead
	// for every notice of their corp, and lets them remind their own
	// unread people. Default true; false: only roles count.
	LeadersSee *bool `yaml:"leaders_see"`
}

// LoginOff as dashboard.login_app turns sign-in with WeCom off.
const LoginOff = "off"

// RoleGrant is one role of a WeCom member (dashboard.roles[]): admin of
// corp, sender of apps (apps[].name) in corp, or viewer of departments'
// subtrees in corp.
type RoleGrant struct {
	UserID string `yaml:"userid"`
	Grant  `yaml:",inline"`
}

// Grant is one role in one corp (issue 31): dashboard.roles[]'s, or
// the one a dashboard.users[] or dashboard.tokens[] entry grants
// instead of Corps ({role: viewer, corp: ww…, departments: [4]}).
type Grant struct {
	Role        string   `yaml:"role"`
	Corp        string   `yaml:"corp"`
	Apps        []string `yaml:"apps"`
	Departments []int64  `yaml:"departments"`
	// Audience keeps a sender to part of the directory (issue 41):
	// {departments: [4], tags: [7]} allows those departments' subtrees
	// and those tags, never 全员.
	Audience SenderAudience `yaml:"audience"`
}

// Scope is g's corp, apps, departments and audience as yidu takes them.
func (g Grant) Scope() yidu.Scope {
	return yidu.Scope{Corp: g.Corp, Apps: g.Apps, Departments: g.Departments,
		Audience: yidu.SenderAudience{Departments: g.Audience.Departments, Tags: g.Audience.Tags}}
}

// SenderAudience is dashboard.roles[].audience.
type SenderAudience struct {
	Departments []int64 `yaml:"departments"`
	Tags        []int64 `yaml:"tags"`
}

// SeeLeaders is LeadersSee with its default.
func (d Dashboard) SeeLeaders() bool { return d.LeadersSee == nil || *d.LeadersSee }

// WeComLoginApp returns the app people sign in through with WeCom, and
// false when sign-in with WeCom is off: login_app "off", no public_url
// (the redirect must be the configured one), or no app with a secret.
func (c Config) WeComLoginApp() (App, bool) {
	if c.Dashboard.LoginApp == LoginOff || c.Dashboard.PublicURL == "" {
		return App{}, false
	}
	for _, a := range c.Apps {
		if (c.Dashboard.LoginApp == "" || a.Name == c.Dashboard.LoginApp) && a.Secret != "" {
			return a, true
		}
	}
	return App{}, false
}

// Token is an API bearer token and the corps it may see ("*" for all).
type Token struct {
	Name  string   `yaml:"name"`
	Token string   `yaml:"token"`
	Corps []string `yaml:"corps"`
	// Grant is one role instead of Corps; Corps alone stays an admin of
	// those corps.
	Grant `yaml:",inline"`
}

// User is a person who may sign in to the dashboard.
type User struct {
	Name string `yaml:"name"`
	// PasswordHash is a bcrypt hash (yidu hash-password prints one).
	PasswordHash string   `yaml:"password_hash"`
	Corps        []string `yaml:"corps"`
	// Grant is one role instead of Corps; Corps alone stays an admin of
	// those corps.
	Grant `yaml:",inline"`

	// from says where the user came from in errors (default
	// dashboard.users[i]).
	from string
}

// Proxies parses TrustedProxies (clientip's one parser, entry by entry so
// the error names the bad one).
func (d Dashboard) Proxies() ([]netip.Prefix, error) {
	var out []netip.Prefix
	for i, p := range d.TrustedProxies {
		pp, err := clientip.ParseProxies([]string{p})
		if err != nil {
			return nil, fmt.Errorf("config: dashboard.trusted_proxies[%d] %q: want a CIDR (10.0.0.0/8) or an address", i, p)
		}
		out = append(out, pp...)
	}
	return out, nil
}

// ReminderDelay is dashboard.min_reminder_delay, 0 being its default.
func (d Dashboard) ReminderDelay() time.Duration {
	if d.MinReminderDelay == 0 {
		return yidu.DefaultMinReminderDelay
	}
	return time.Duration(d.MinReminderDelay)
}
