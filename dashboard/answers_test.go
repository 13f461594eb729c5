package dashboard

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"testing"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/campaign"
	"github.com/yidu-io/yidu/progress"
)

// TestAnswers: the error table answers each outcome with the status and
// words the API documents, the first rule winning.
func TestAnswers(t *testing.T) {
	tests := []struct {
		err  error
		code int
		msg  string
	}{
		{badParam("limit must be 1..1000"), 400, "bad parameter: limit must be 1..1000"},
		{fmt.Errorf("department 9: %w", progress.ErrUnknownDepartment), 400, "bad parameter: department 9: unknown department"},
		{errNotFound, 404, "not found"},
		{yidu.ErrNotFound, 404, "not found"},
		{errForbidden, 403, "your role may not change this notice"},
		{fmt.Errorf("%w: only the sender may recall", campaign.ErrForbidden), 403, "only the sender may recall"},
		{campaign.ErrBusy, 429, campaign.ErrBusy.Error()},
		{&campaign.TooSoonError{}, 429, (&campaign.TooSoonError{}).Error()},
		{yidu.ErrRecalled, 409, "the message was recalled"},
		{fmt.Errorf("x: %w", campaign.ErrNoTemplates), 503, "x: " + campaign.ErrNoTemplates.Error()},
		{context.Canceled, 499, "client went away"},
		{fmt.Errorf("redis: %w", context.DeadlineExceeded), 503, "temporarily unavailable"},
		{&net.OpError{Op: "dial", Err: errors.New("refused")}, 503, "temporarily unavailable"},
		{io.ErrUnexpectedEOF, 503, "temporarily unavailable"},
		{errors.New("boom"), 500, "internal error"},
	}
	for _, tt := range tests {
		if code, msg := httpStatus(tt.err); code != tt.code || msg != tt.msg {
			t.Errorf("httpStatus(%v) = %d %q; want %d %q", tt.err, code, msg, tt.code, tt.msg)
		}
	}
}
