package dashboard

import (
	"fmt"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/internal/opt"
)

// Validate fills o's zero values with the defaults documented on Options
// and checks what the dashboard alone decides: each principal's share
// within its whole, the stream write bound and the public URL (the
// tokens' are access.IdentityOptions.Validate's). New calls it; cmd calls it on the options it maps from the
// configuration too, so that a bad file is refused before anything
// starts. Errors name the option as the configuration spells it.
func (o *Options) Validate() error {
	opt.Logger(&o.Logger)
	opt.Clock(&o.Now)
	if o.MaxStreams == 0 {
		o.MaxStreams = DefaultMaxStreams
	}
	if o.MaxStreamsPerPrincipal == 0 {
		o.MaxStreamsPerPrincipal = min(DefaultMaxStreamsPerPrincipal, o.MaxStreams)
	}
	if o.StreamWriteTimeout == 0 {
		o.StreamWriteTimeout = DefaultStreamWriteTimeout
	}
	if o.MaxQueries == 0 {
		o.MaxQueries = DefaultMaxQueries
	}
	if o.MaxQueriesPerPrincipal == 0 {
		o.MaxQueriesPerPrincipal = min(DefaultMaxQueriesPerPrincipal, o.MaxQueries)
	}
	switch {
	case o.MaxStreams < 1:
		return fmt.Errorf("dashboard: max_streams %d must be positive", o.MaxStreams)
	case o.MaxStreamsPerPrincipal < 1 || o.MaxStreamsPerPrincipal > o.MaxStreams:
		return fmt.Errorf("dashboard: max_streams_per_principal %d must be in 1..max_streams (%d)", o.MaxStreamsPerPrincipal, o.MaxStreams)
	case o.StreamWriteTimeout < 0:
		return fmt.Errorf("dashboard: stream_write_timeout %v must be positive", o.StreamWriteTimeout)
	case o.MaxQueries < 1:
		return fmt.Errorf("dashboard: max_queries %d must be positive", o.MaxQueries)
	case o.MaxQueriesPerPrincipal < 1 || o.MaxQueriesPerPrincipal > o.MaxQueries:
		return fmt.Errorf("dashboard: max_queries_per_principal %d must be in 1..max_queries (%d)", o.MaxQueriesPerPrincipal, o.MaxQueries)
	}
	if err := yidu.CheckPublicURL(o.PublicURL); err != nil {
		return fmt.Errorf("dashboard: public_url %q: %w", o.PublicURL, err)
	}
	return nil
}
