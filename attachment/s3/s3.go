// Package s3 keeps attachments' bytes in an S3-compatible bucket
// (attachments.s3: Amazon S3, Aliyun OSS, Tencent COS, MinIO) through
// minio-go, and signs short-lived GET URLs for browsers, so a storm of
// readers fetches a PDF from object storage (or its CDN), not from the
// receivers. The credentials stay in the client: nothing here logs them,
// and a presigned URL carries only a signature derived from them.
package s3

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"strings"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/yidu-io/yidu/internal/opt"
)

// DefaultPresignTTL is Options.PresignTTL's default: long enough for a
// phone to read a PDF range by range, short enough that a link shared
// out of the page is soon dead.
const DefaultPresignTTL = 15 * time.Minute

// MaxPresignTTL is the longest a SigV4 presigned URL may live (7 days).
const MaxPresignTTL = 7 * 24 * time.Hour

// Addressing is how a bucket is named in a request's URL.
type Addressing string

const (
	// AddressingAuto lets the client choose by the endpoint (virtual
	// hosts for Amazon S3 and Aliyun OSS, paths elsewhere).
	AddressingAuto Addressing = "auto"
	// AddressingPath is http(s)://endpoint/bucket/key.
	AddressingPath Addressing = "path"
	// AddressingVirtual is http(s)://bucket.endpoint/key (Tencent COS).
	AddressingVirtual Addressing = "virtual"
)

// Options configures a Bucket.
type Options struct {
	// Endpoint is the server's host[:port], without scheme
	// (oss-cn-hangzhou.aliyuncs.com, cos.ap-shanghai.myqcloud.com,
	// minio.internal:9000).
	Endpoint string
	Bucket   string
	// Region is the bucket's region (default us-east-1): given, the
	// client never asks the server for it, so signing a URL makes no
	// request.
	Region    string
	AccessKey string
	SecretKey string
	// UseSSL speaks https to the endpoint (and the presigned URLs are
	// https).
	UseSSL bool
	// Prefix starts every key (default "attachments/").
	Prefix string
	// Addressing is how the bucket is named in URLs (default
	// AddressingAuto).
	Addressing Addressing
	// PresignTTL is how long a presigned URL is good for (default
	// DefaultPresignTTL, at most MaxPresignTTL).
	PresignTTL time.Duration
	Logger     *slog.Logger
}

// Bucket is one bucket of an S3-compatible server.
type Bucket struct {
	client *minio.Client
	bucket string
	prefix string
	ttl    time.Duration
	origin string
	log    *slog.Logger
}

// New returns a Bucket; it makes no request (Check does).
func New(opts Options) (*Bucket, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	if opts.Region == "" {
		opts.Region = "us-east-1"
	}
	if opts.Prefix == "" {
		opts.Prefix = "attachments/"
	}
	if opts.PresignTTL == 0 {
		opts.PresignTTL = DefaultPresignTTL
	}
	opt.Logger(&opts.Logger)
	lookup := minio.BucketLookupAuto
	switch opts.Addressing {
	case AddressingPath:
		lookup = minio.BucketLookupPath
	case AddressingVirtual:
		lookup = minio.BucketLookupDNS
	}
	c, err := minio.New(opts.Endpoint, &minio.Options{
		Creds:        credentials.NewStaticV4(opts.AccessKey, opts.SecretKey, ""),
		Secure:       opts.UseSSL,
		Region:       opts.Region,
		BucketLookup: lookup,
	})
	if err != nil {
		return nil, fmt.Errorf("s3: client for %s: %w", opts.Endpoint, err)
	}
	b := &Bucket{client: c, bucket: opts.Bucket, prefix: opts.Prefix, ttl: opts.PresignTTL, log: opts.Logger.With("component", "s3")}
	// The origin of every presigned URL: signing one is local (the
	// region is known).
	u, err := c.PresignedGetObject(context.Background(), opts.Bucket, opts.Prefix+"origin", time.Minute, nil)
	if err != nil {
		return nil, fmt.Errorf("s3: sign a URL of %s: %w", opts.Bucket, err)
	}
	b.origin = u.Scheme + "://" + u.Host
	return b, nil
}

// Validate reports the first missing or bad option (secrets are never
// quoted).
func (o Options) Validate() error {
	switch {
	case o.Endpoint == "" || strings.Contains(o.Endpoint, "/"):
		return errors.New("s3: endpoint is required, a host[:port] without scheme or path")
	case o.Bucket == "":
		return errors.New("s3: bucket is required")
	case o.AccessKey == "" || o.SecretKey == "":
		return errors.New("s3: access_key and secret_key are required")
	case o.PresignTTL < 0 || o.PresignTTL > MaxPresignTTL || (o.PresignTTL > 0 && o.PresignTTL < time.Minute):
		return fmt.Errorf("s3: presign_ttl must be between 1m and %s", MaxPresignTTL)
	case o.Addressing != "" && o.Addressing != AddressingAuto && o.Addressing != AddressingPath && o.Addressing != AddressingVirtual:
		return fmt.Errorf("s3: addressing %q must be auto, path or virtual", o.Addressing)
	case strings.HasPrefix(o.Prefix, "/"):
		return errors.New("s3: prefix must not start with /")
	}
	return nil
}

// Check asks the server whether the bucket exists (the keys work).
func (b *Bucket) Check(ctx context.Context) error {
	ok, err := b.client.BucketExists(ctx, b.bucket)
	if err != nil {
		return fmt.Errorf("s3: bucket %s: %w", b.bucket, err)
	}
	if !ok {
		return fmt.Errorf("s3: bucket %s does not exist", b.bucket)
	}
	return nil
}

// Put writes size bytes of r under key.
func (b *Bucket) Put(ctx context.Context, key string, r io.Reader, size int64, contentType string) error {
	if _, err := b.client.PutObject(ctx, b.bucket, b.prefix+key, r, size, minio.PutObjectOptions{ContentType: contentType}); err != nil {
		return fmt.Errorf("s3: put %s: %w", key, err)
	}
	return nil
}

// ErrNotFound is a key the bucket does not hold.
var ErrNotFound = errors.New("s3: no such key")

// Open returns the bytes under key; the caller closes them.
func (b *Bucket) Open(ctx context.Context, key string) (io.ReadCloser, error) {
	o, err := b.client.GetObject(ctx, b.bucket, b.prefix+key, minio.GetObjectOptions{})
	if err == nil {
		// GetObject asks nothing yet: Stat makes the request, so a
		// missing key is an error here, not in the middle of a copy.
		if _, err = o.Stat(); err != nil {
			o.Close()
		}
	}
	if err != nil {
		if minio.ToErrorResponse(err).Code == minio.NoSuchKey {
			return nil, fmt.Errorf("s3: get %s: %w", key, ErrNotFound)
		}
		return nil, fmt.Errorf("s3: get %s: %w", key, err)
	}
	return o, nil
}

// Presign returns a URL that GETs key's bytes without credentials until
// it expires (Options.PresignTTL), answered with contentType, inline as
// name, and kept a year by the browser.
func (b *Bucket) Presign(ctx context.Context, key, name, contentType string) (string, time.Time, error) {
	q := url.Values{}
	q.Set("response-content-type", contentType)
	q.Set("response-content-disposition", "inline; filename*=UTF-8''"+url.PathEscape(name))
	// The bytes under a key never change: the reader's browser keeps
	// them for as long as it is handed this same URL.
	q.Set("response-cache-control", "private, max-age=31536000, immutable")
	at := time.Now()
	u, err := b.client.PresignedGetObject(ctx, b.bucket, b.prefix+key, b.ttl, q)
	if err != nil {
		return "", time.Time{}, fmt.Errorf("s3: sign %s: %w", key, err)
	}
	return u.String(), at.Add(b.ttl), nil
}

// Origin is the scheme://host of the presigned URLs.
func (b *Bucket) Origin() string { return b.origin }

// TTL is how long a presigned URL lives.
func (b *Bucket) TTL() time.Duration { return b.ttl }
