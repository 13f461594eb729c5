package process

import (
	"github.com/yidu-io/yidu/bitmap"
	"github.com/yidu-io/yidu/campaign"
	"github.com/yidu-io/yidu/tracker"
)

// The follow-up round engine's providers (issue 30).
var (
	_ campaign.LiveReads   = (*bitmap.Store)(nil)
	_ campaign.RoundSender = (*tracker.Registry)(nil)
)
