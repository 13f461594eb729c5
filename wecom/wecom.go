// Package wecom is yidu's client of WeCom's server API (qyapi): every call
// yidu makes with a secret (an app's, or the corp's contacts-sync secret)
// goes through it, so the secrets reach no other package. It holds the
// access-token sessions (one per secret, replaced whole when WeCom rejects
// the token; a token serves only its own secret's calls), message/send for
// cards and reminders and message/recall (Sender), the OAuth2 code exchange of tracked links
// (OAuth), the directory reads of idmap's sync (Directory), and scrubs
// every error of the URLs and credentials silenceper puts in them. WeCom's
// refusals are *APIError.
//
// silenceper/wechat/v2's process-wide settings are cmd's: util.SetURIModifier
// (config wecom.api_base: a fake WeCom in the demo and tests) and
// util.DefaultHTTPClient's timeout. This package never changes them.
package wecom

// App is what the API clients need of one WeCom app: its corp, agent and
// secret (应用 Secret, which gettoken turns into an access_token).
type App struct {
	CorpID  string
	AgentID int64
	Secret  string
}

// appKey finds an app's credentials from a callback's or message's corp
// and agent.
type appKey struct {
	corpID  string
	agentID int64
}
