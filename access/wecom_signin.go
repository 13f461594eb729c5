package access

import "context"

// CodeExchanger exchanges a WeCom sign-in code for the member's UserID
// (wecom.OAuth, auth/getuserinfo, doc path 91023).
type CodeExchanger interface {
	UserID(ctx context.Context, corpID string, agentID int64, code string) (string, error)
}
