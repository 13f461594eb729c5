package process

import (
	"cmp"
	"fmt"

	"github.com/yidu-io/yidu/access"
	"github.com/yidu-io/yidu/cmd/internal/config"
	"github.com/yidu-io/yidu/dashboard"
	"github.com/yidu-io/yidu/flushd"
)

// The configuration mapped onto each library's Options. config parses the
// file and checks what crosses libraries; each library owns its defaults
// (an Options zero value) and its checks (Options.Validate). Here the one
// is turned into the other, and Check runs the libraries' checks before
// anything is built, so a bad yidu.yaml is refused at start, naming the
// option.

// Check runs the checks each library makes of the options cfg maps onto:
// the dashboard's limits and public URL, access's tokens and users, flushd's batch size and
// the MySQL dialect. config.Load checked the rest; cmd calls both.
func Check(cfg config.Config) error {
	d := DashboardOptions(cfg)
	if err := d.Validate(); err != nil {
		return fmt.Errorf("config: %w", err)
	}
	if err := IdentityOptions(cfg).Validate(); err != nil {
		return fmt.Errorf("config: %w", err)
	}
	if err := FlushdOptions(cfg).Validate(); err != nil {
		return fmt.Errorf("config: %w", err)
	}
	if s := cfg.Attachments.S3; s.Enabled() {
		if err := S3Options(s).Validate(); err != nil {
			return fmt.Errorf("config: attachments.s3: %w", err)
		}
	}
	if dl := cfg.MySQL.Dialect; dl != config.DialectAuto && !flushd.Dialect(dl).Valid() {
		return fmt.Errorf("config: mysql.dialect %q must be %s, %s, %s or %s", dl, config.DialectAuto, flushd.DialectMariaDB, flushd.DialectMySQL, flushd.DialectTiDB)
	}
	return nil
}

// DashboardOptions maps cfg onto the dashboard's options, without the
// dependencies cmd builds (access, sessions, audit, campaigns, logger).
// Zero values stay zero: the dashboard's defaults, but for the heavy
// queries, whose default is capped at half the MySQL pool (the rest is
// the other roles'; config checks a value given).
func DashboardOptions(cfg config.Config) dashboard.Options {
	c := cfg.Dashboard
	conns := cmp.Or(cfg.MySQL.MaxOpenConns, config.DefaultMySQLConns)
	return dashboard.Options{
		PublicURL: c.PublicURL,
		// One principal's share of the streams and of the heavy
		// queries; the queries leave most of the MySQL pool to the
		// receiver and flushd (docs/reliability.md, Hostile use).
		MaxStreams:             c.MaxStreams,
		MaxStreamsPerPrincipal: c.MaxStreamsPerPrincipal,
		StreamWriteTimeout:     c.StreamWriteTimeout.D(),
		MaxQueries:             cmp.Or(c.MaxQueries, min(dashboard.DefaultMaxQueries, conns/2)),
		MaxQueriesPerPrincipal: c.MaxQueriesPerPrincipal,
		Apps:                   DomainApps(cfg.Apps),
		ConfirmOver:            c.ConfirmOver,
	}
}

// IdentityOptions maps cfg onto access's identities (the dashboard's
// tokens, password users and session lifetime), without the session
// store and WeCom sign-in cmd builds. Zero values are access's defaults.
func IdentityOptions(cfg config.Config) access.IdentityOptions {
	c := cfg.Dashboard
	return access.IdentityOptions{Tokens: dashboardTokens(c.Tokens), Users: dashboardUsers(c.Users), SessionTTL: c.SessionTTL.D()}
}

// FlushdOptions maps cfg onto flushd's options, without the dependencies
// cmd builds (statement, live view, members, Kafka client options,
// logger). Zero values are flushd's defaults.
func FlushdOptions(cfg config.Config) flushd.Options {
	return flushd.Options{
		Brokers:        cfg.Kafka.Brokers,
		Topic:          cfg.Kafka.Topic,
		Group:          cfg.Kafka.Group,
		Interval:       cfg.Flushd.Interval.D(),
		BatchSize:      cfg.Flushd.BatchSize,
		MaxPending:     cfg.Flushd.MaxPending,
		DrainTimeout:   cfg.Flushd.DrainTimeout.D(),
		SessionTimeout: cfg.Kafka.SessionTimeout.D(),
		InstanceID:     cfg.Flushd.InstanceID,
	}
}
