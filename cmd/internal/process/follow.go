package process

import (
	"cmp"
	"log/slog"
	"net/url"
	"strings"
	"time"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/campaign/loops"
	"github.com/yidu-io/yidu/cmd/internal/config"
)

// followUpRounds builds the follow-up round engine (issue 30) from the
// configuration: each app's zone and escalation fallback, the minimum
// delay, the tracker as sender (the same cards and records as "remind
// now") and the live bitmaps as the source of each round's people.
func followUpRounds(m *Main, cfg config.Config, log *slog.Logger) *loops.Rounds {
	zones := map[string]*time.Location{}
	fallback := map[string][]string{}
	quota := map[string]int{}
	for _, a := range cfg.Apps {
		loc, err := time.LoadLocation(cmp.Or(a.Timezone, yidu.DefaultTimezone))
		if err != nil {
			log.Warn("follow-up: app time zone; UTC used", "app", a.Name, "err", err)
			loc = time.UTC
		}
		zones[a.Name] = loc
		fallback[a.Name] = a.EscalationFallback
		quota[a.Name] = a.DailyQuota
	}
	return &loops.Rounds{
		DB: m.DB, Reads: m.Store, People: m.Mapper, Org: m.Mapper, Seats: m.Mapper, Sender: m.Tracker, Joiners: m.Tracker,
		Log: log.With("component", "follow-up"), Now: time.Now, Owner: loops.DefaultOwner(),
		TTL: loops.DefaultLeaseTTL, MinGap: cfg.Dashboard.ReminderDelay(),
		Zone:       func(app string) *time.Location { return zones[app] },
		Fallback:   func(app string) []string { return fallback[app] },
		DailyQuota: func(app string) int { return quota[app] },
		PageURL:    digestPage(cfg),
	}
}

// digestPage links a leader's digest to the notice's page when they can
// sign in to it with WeCom (config.WeComLoginApp); nil otherwise.
func digestPage(cfg config.Config) func(msgID string) string {
	if _, ok := cfg.WeComLoginApp(); !ok {
		return nil
	}
	base := strings.TrimRight(cfg.Dashboard.PublicURL, "/")
	return func(msgID string) string { return base + "/m/" + url.PathEscape(msgID) }
}
