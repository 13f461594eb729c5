// Package handle is what every handler group of the dashboard stands on:
// the caller's View of a notice riding in the request's context
// (WithView, ViewFrom, Scoped), the audit rows of acts written with the
// request's address (Base: Record, RecordDone, RecordActs, Refused,
// Disclose), the answer of an error (Base.Fail, the dashboard's error
// table) and the parsers of what a request carries (ParseMsgID,
// ParseRecipientQuery, DecodeStrict, AudienceJSON), each refusing with an
// error wrapping ErrBadParam or naming its field.
//
// It decides nothing about who may do what (access.Decide does, through
// Decide) and serves no route: package dashboard mounts the groups
// (dashboard/internal/disclose, dashboard/internal/compose) and its own
// handlers over one Base.
package handle
