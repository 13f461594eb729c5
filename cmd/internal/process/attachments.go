package process

import (
	"database/sql"
	"fmt"
	"log/slog"

	"github.com/yidu-io/yidu/attachment"
	"github.com/yidu-io/yidu/attachment/s3"
	"github.com/yidu-io/yidu/cmd/internal/config"
	"github.com/yidu-io/yidu/page"
)

// S3Options maps attachments.s3 onto package s3's options (without the
// logger). Zero values are s3's defaults.
func S3Options(c config.S3) s3.Options {
	return s3.Options{
		Endpoint: c.Endpoint, Bucket: c.Bucket, Region: c.Region,
		AccessKey: c.AccessKey, SecretKey: c.SecretKey, UseSSL: c.SSL(),
		Prefix: c.Prefix, Addressing: s3.Addressing(c.Addressing), PresignTTL: c.PresignTTL.D(),
	}
}

// attachments returns the attachment store over db: bytes in MySQL, or
// in attachments.s3's bucket when it is set.
func attachments(cfg config.Config, db *sql.DB, log *slog.Logger) (*attachment.Store, error) {
	opts := attachment.Options{Logger: log}
	if cfg.Attachments.S3.Enabled() {
		o := S3Options(cfg.Attachments.S3)
		o.Logger = log
		b, err := s3.New(o)
		if err != nil {
			return nil, fmt.Errorf("attachments.s3: %w", err)
		}
		opts.Objects = b
	}
	return attachment.New(db, opts)
}

// attachmentLinks is the reading page's links to the bucket, nil
// without attachments.s3 (a nil *Store in the interface would not be).
func attachmentLinks(atts *attachment.Store) page.Links {
	if atts.Origin() == "" {
		return nil
	}
	return atts
}
