package config

import (
	"fmt"
	"net/url"
	"slices"
	"strings"

	"github.com/yidu-io/yidu"
)

// checkPairings refuses a setting whose partner is missing, so that it
// would start and silently never work (issue 46): approval asks its
// approvers with a card from the app that opens the approval page on
// dashboard.public_url; the reading page's signals come from pages on
// receiver.public_url, whose members WeCom's OAuth2 names through the
// app's secret.
func (c Config) checkPairings() error {
	for _, a := range c.Apps {
		if a.Approval != nil {
			if _, err := c.typedApprovers(a.Name, a.Approval); err != nil {
				return err
			}
			switch {
			case c.Dashboard.PublicURL == "":
				return fmt.Errorf("config: app %q: approval needs dashboard.public_url (or YIDU_DASHBOARD_PUBLIC_URL): "+
					"the approvers' card opens the approval page there; without it nobody would ever be asked", a.Name)
			case a.Secret == "":
				return fmt.Errorf("config: app %q: approval needs the app's secret (%s): the approvers' card is sent "+
					"by the app (message/send); without it nobody would ever be asked", a.Name, EnvName(a.Name, "secret"))
			}
		}
		signals, err := yidu.ParseReadSignals(a.ReadSignals)
		if err != nil || a.ReadSignals == nil {
			continue // Validate's apps loop said so; the default needs no page
		}
		for _, s := range signals {
			if s != yidu.SignalReadToEnd && s != yidu.SignalAcknowledged {
				continue
			}
			switch {
			case c.Receiver.PublicURL == "":
				return fmt.Errorf("config: app %q: read_signals %s needs receiver.public_url (or YIDU_RECEIVER_PUBLIC_URL): "+
					"it is given on the reading page there; without it nothing would ever count", a.Name, s)
			case a.Secret == "":
				return fmt.Errorf("config: app %q: read_signals %s needs the app's secret (%s): the reading page "+
					"learns who reads through WeCom's OAuth2 with it", a.Name, s, EnvName(a.Name, "secret"))
			}
		}
		if c.Receiver.PublicURL == "" && !slices.ContainsFunc(signals, func(s yidu.Signal) bool {
			return s == yidu.SignalButton || s == yidu.SignalEnterAgent
		}) {
			return fmt.Errorf("config: app %q: read_signals %v are all given through receiver.public_url, which is not set: "+
				"nothing would ever count as read", a.Name, a.ReadSignals)
		}
	}
	return nil
}

// typedApprovers returns app's approvers each with its kind (wecom:,
// user:, token:; yidu.Approval). A bare name is the kind it names among
// dashboard.users, dashboard.tokens and dashboard.roles (WeCom members),
// or a WeCom member's UserID when it names none of them, as before. A
// bare name of two kinds is refused, and so is a user: or token: entry
// naming nobody (issue 46: a WeCom member with UserID admin approved a
// notice meant for the password user admin).
func (c Config) typedApprovers(app string, a *Approval) ([]string, error) {
	users, tokens, members := map[string]bool{}, map[string]bool{}, map[string]bool{}
	for _, u := range c.Dashboard.Users {
		users[u.Name] = true
	}
	for _, t := range c.Dashboard.Tokens {
		tokens[t.Name] = true
	}
	for _, r := range c.Dashboard.Roles {
		members[r.UserID] = true
	}
	out := make([]string, 0, len(a.Approvers))
	for i, e := range a.Approvers {
		where := fmt.Sprintf("config: app %q: approval.approvers[%d] %q", app, i, e)
		kind, name, err := yidu.ParseApprover(e)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", where, err)
		}
		switch kind {
		case yidu.ApproverUser:
			if !users[name] {
				return nil, fmt.Errorf("%s: no dashboard.users entry is named %q", where, name)
			}
		case yidu.ApproverToken:
			if !tokens[name] {
				return nil, fmt.Errorf("%s: no dashboard.tokens entry is named %q", where, name)
			}
		case "":
			var kinds, what, typed []string
			for _, k := range []struct {
				kind, what string
				is         bool
			}{{yidu.ApproverUser, "a password user (dashboard.users)", users[name]},
				{yidu.ApproverToken, "an API token (dashboard.tokens)", tokens[name]},
				{yidu.ApproverWeCom, "a WeCom member (dashboard.roles)", members[name]}} {
				if k.is {
					kinds, what, typed = append(kinds, k.kind), append(what, k.what), append(typed, k.kind+":"+name)
				}
			}
			switch len(kinds) {
			case 0:
				kind = yidu.ApproverWeCom // a member who needs no role of their own
			case 1:
				kind = kinds[0]
			default:
				return nil, fmt.Errorf("%s is ambiguous: it names %s; write %s to say which", where,
					strings.Join(what, " and "), strings.Join(typed, " or "))
			}
		}
		out = append(out, kind+":"+name)
	}
	return out, nil
}

// TypeApprovers writes every app's approvers with their kinds
// (typedApprovers), once Validate passed: Load does, and so does
// process.NewMain for a Config built otherwise (yidu-demo, the tests), so
// a bare "admin" meant for the password user never names a WeCom member
// admin in a running process. An entry Validate would refuse is left as
// it is; a typed one stays as it is.
func (c *Config) TypeApprovers() {
	for i, a := range c.Apps {
		if a.Approval == nil {
			continue
		}
		typed, err := c.typedApprovers(a.Name, a.Approval)
		if err != nil {
			continue // Validate refused it
		}
		cp := *a.Approval
		cp.Approvers = typed
		c.Apps[i].Approval = &cp
	}
}

// checkSignIn checks sign-in with WeCom and the roles (issue 31): the
// sign-in hosts, the login app, the verification file, and each role
// as package yidu's Scope.Validate has it, its apps among apps[] of its
// corp.
func (c Config) checkSignIn() error {
	for _, b := range []struct{ key, v string }{{"wecom.oauth_base", c.WeCom.OAuthBase}, {"wecom.login_base", c.WeCom.LoginBase}} {
		if b.v == "" {
			continue
		}
		u, err := url.Parse(b.v)
		if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
			return fmt.Errorf("config: %s %q: want an origin such as https://open.weixin.qq.com (yidu appends WeCom's paths)", b.key, b.v)
		}
	}
	if l := c.Dashboard.LoginApp; l != "" && l != LoginOff {
		a, ok := c.App(l)
		switch {
		case !ok:
			return fmt.Errorf("config: dashboard.login_app %q: no such app in apps[]", l)
		case a.Secret == "":
			return fmt.Errorf("config: dashboard.login_app %q: the app has no secret (%s), which auth/getuserinfo needs", l, EnvName(l, "secret"))
		case c.Dashboard.PublicURL == "":
			return fmt.Errorf("config: dashboard.login_app %q: sign-in with WeCom needs dashboard.public_url (the redirect WeCom returns to)", l)
		}
	}
	if _, _, err := c.WeCom.ReadVerifyFile(); err != nil {
		return err
	}
	appsOf := func(where, who, corp string, apps []string) error {
		for _, name := range apps {
			if a, ok := c.App(name); !ok || a.CorpID != corp {
				return fmt.Errorf("config: %s (%s): app %q is not an app of corp %s in apps[]", where, who, name, corp)
			}
		}
		return nil
	}
	for i, t := range c.Dashboard.Tokens {
		if err := appsOf(fmt.Sprintf("dashboard.tokens[%d]", i), t.Name, t.Corp, t.Apps); err != nil {
			return err
		}
	}
	for i, u := range c.Dashboard.Users {
		if err := appsOf(fmt.Sprintf("dashboard.users[%d]", i), u.Name, u.Corp, u.Apps); err != nil {
			return err
		}
	}
	for i, r := range c.Dashboard.Roles {
		where := fmt.Sprintf("dashboard.roles[%d]", i)
		if r.UserID == "" || len(r.UserID) > 64 {
			return fmt.Errorf("config: %s: userid is required (a WeCom UserID, at most 64 bytes)", where)
		}
		if err := r.Scope().Validate(yidu.Role(r.Role)); err != nil {
			return fmt.Errorf("config: %s (%s): %w", where, r.UserID, err)
		}
		if err := appsOf(where, r.UserID, r.Corp, r.Apps); err != nil {
			return err
		}
	}
	return nil
}
