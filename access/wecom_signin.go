package access

import "context"

// CodeExchanger exchanges a WeCom sign-in code for the member's UserID
// (wecom.OAuth, auth/getuserinfo, doc path 91023).
type CodeExchanger interface {
	UserID(ctx context.Context, corpID string, agentID int64, code string) (string, error)
}

// FinishWeCom finishes a sign-in that came back from WeCom with state and
// code to the browser holding nonce: the state is consumed once and must
// be this browser's (ErrBadState), the code must look like one of
// WeCom's (at most 512 bytes, doc path 91022) and is used once
// (ErrCodeUsed), then exchanged for the member's UserID through agentID
// (ErrNotMember when WeCom names none: an openid, not a member). It
// returns the path to go on to and the corp of the sign-in.
func (s *States) FinishWeCom(ctx context.Context, oauth CodeExchanger, agentID int64, state, nonce, code string) (next, corp, userID string, err error) {
	next, corp, err = s.Finish(ctx, state, nonce)
	if err == nil && (code == "" || len(code) > 512) {
		err = ErrBadState
	}
	if err == nil {
		err = s.UseCode(ctx, code)
	}
	if err == nil {
		userID, err = oauth.UserID(ctx, corp, agentID, code)
		if err == nil && userID == "" {
			err = ErrNotMember
		}
	}
	return next, corp, userID, err
}
