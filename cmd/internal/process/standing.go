package process

import (
	"log/slog"
	"time"

	"github.com/yidu-io/yidu/campaign/loops"
	"github.com/yidu-io/yidu/cmd/internal/config"
)

// standingLoop builds the enrolment of standing notices' joiners, their
// rounds and cycles (issue 51): the directory as it is synced, the
// tracker as the enroller and sender, the follow-up's zones and minimum
// delay.
func standingLoop(m *Main, cfg config.Config, notices loops.Versions, log *slog.Logger) *loops.StandingLoop {
	rounds := followUpRounds(m, cfg, log)
	return &loops.StandingLoop{
		DB: m.DB, Directory: m.Mapper, Tracker: m.Tracker, Contents: notices, Reads: m.Store,
		Log: log.With("component", "standing"), Now: time.Now, Owner: loops.DefaultOwner(),
		TTL: loops.DefaultLeaseTTL, MinGap: rounds.MinGap, Zone: rounds.Zone,
	}
}
