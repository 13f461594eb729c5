package scopetest

import (
	"context"

	"github.com/yidu-io/yidu/dashboard"
	"github.com/yidu-io/yidu/idmap"
)

// directory is the Mapper as the dashboard's directory, as cmd wires it
// (process.audienceDirectory): its Index as a dashboard.DirectoryIndex.
type directory struct{ *idmap.Mapper }

func (d directory) DirectoryIndex(ctx context.Context, corpID string) (dashboard.DirectoryIndex, error) {
	idx, err := d.Index(ctx, corpID)
	if err != nil {
		return nil, err
	}
	return idx, nil
}

var _ dashboard.AudienceDirectory = directory{}
