package main

import (
	"context"
	"time"

	"github.com/yidu-io/yidu/attachment/s3"
	"github.com/yidu-io/yidu/cmd/internal/config"
	"github.com/yidu-io/yidu/cmd/internal/process"
	"github.com/yidu-io/yidu/wecom"
)

// attachmentsCheck asks attachments.s3's server whether its bucket is
// there for the keys given (a HEAD of the bucket: nothing is written).
func attachmentsCheck(ctx context.Context, c config.S3) wecom.Check {
	const name = "attachments bucket"
	if !c.Enabled() {
		return wecom.Check{Name: name, Status: wecom.CheckSkipped, Detail: "attachments.s3 not set: attachments' bytes are kept in MySQL"}
	}
	b, err := s3.New(process.S3Options(c))
	if err == nil {
		ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		defer cancel()
		err = b.Check(ctx)
	}
	if err != nil {
		return wecom.Check{Name: name, Status: wecom.CheckFail, Detail: err.Error()}
	}
	return wecom.Check{Name: name, Status: wecom.CheckOK, Detail: c.Bucket + " at " + c.Endpoint + "; links at " + b.Origin()}
}
