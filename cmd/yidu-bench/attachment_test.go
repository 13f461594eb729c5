package main

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/yidu-io/yidu/internal/rig/rigtest"
)

// TestBenchAttachmentPhase: the page arm's attachment phase has every
// reader fetch the 2 MiB PDF in pdf.js's 64 KiB ranges, each range the
// PDF's own bytes, then again with its ETag, answered 304; the notice's
// versions are read from MySQL once for the whole phase, not per fetch.
func TestBenchAttachmentPhase(t *testing.T) {
	servers := rigtest.Servers(t)
	const R, readers = 100, 40
	var progress bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	rep, err := Run(ctx, Config{
		Servers:    servers,
		Recipients: R, Conns: 8, FlushInterval: 200 * time.Millisecond,
		Arms: []string{armPage}, ArmTimeout: time.Minute, Progress: &progress, AttachmentReaders: readers,
	})
	if err != nil {
		t.Fatalf("Run: %v\n%s", err, progress.String())
	}
	if len(rep.Arms) != 1 || rep.Arms[0].Attachment == nil {
		t.Fatalf("no attachment phase in the report\n%s", progress.String())
	}
	f := rep.Arms[0].Attachment
	chunks := attachmentSize / attachmentChunk
	if f.Status != "exact" || f.Readers != readers || f.Ranges != readers*chunks || f.NotModified != readers || f.Errors != 0 ||
		f.Bytes != int64(readers)*attachmentSize || f.Refetched != 0 {
		t.Errorf("phase = %+v; want %d readers, %d ranges, %d × 304, exact", f, readers, readers*chunks, readers)
	}
	if f.MBPerSecond <= 0 || f.CPUmsPerMB <= 0 || f.RangeP99ms <= 0 || f.RevalidateP99ms <= 0 {
		t.Errorf("phase = %+v: not a measurement", f)
	}
	if f.MySQLRowsRead != nil && f.MySQLRowsRead["notice_versions"] > 1 {
		t.Errorf("the phase read notice_versions %d times; want at most once", f.MySQLRowsRead["notice_versions"])
	}
}
