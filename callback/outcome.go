package callback

import (
	"errors"
	"net/http"

	"github.com/yidu-io/yidu/callback/wxcrypt"
)

// Request failures of the receiver besides wxcrypt's and ErrBadXML.
var (
	// ErrTimestamp: the query's timestamp is missing or outside the window,
	// a replay of an old (validly signed) callback.
	ErrTimestamp = errors.New("callback: timestamp outside the accepted window")
	// ErrAgentID: the envelope's or the message's AgentID is not the app's.
	ErrAgentID = errors.New("callback: AgentID is not the app's")
	// ErrUnknownApp: no app of that name is configured.
	ErrUnknownApp = errors.New("callback: unknown app")
	// ErrTooLarge: the body exceeds MaxBody.
	ErrTooLarge = errors.New("callback: body too large")
	// ErrBadRequest: the body could not be read.
	ErrBadRequest = errors.New("callback: unreadable request")
	// ErrTimeout: the downstream did not finish within Timeout; WeCom retries.
	ErrTimeout = errors.New("callback: downstream timed out")
	// ErrDownstream: recording the effect failed; WeCom retries.
	ErrDownstream = errors.New("callback: downstream failed")
)

// outcome indexes the outcomes table.
type outcome uint8

const (
	outOK            outcome = iota // effect applied
	outVerified                     // URL verification answered
	outDuplicate                    // already applied (dedup)
	outRateLimited                  // over the member's token bucket
	outIgnored                      // nothing to do for this callback
	outNotRecorded                  // a card press of no recipient of ours: kept nowhere, no passive reply
	outLinkAuthorize                // tracked link verified, sent to WeCom OAuth2
	outLinkLanded                   // back from OAuth2, sent to the target
	outBadSignature
	outStaleTimestamp
	outReceiveID
	outAgentID
	outBadBase64
	outBadPadding
	outBadLength
	outBadXML
	outUnknownApp
	outTooLarge
	outBadRequest
	outTimeout
	outDownstream
	outBadLink
	outLinkSignature
	outInternal // an error missing from the table: a bug
	nOutcomes
)

// outcomes is the one table from request outcome (callbacks and tracked
// links) to HTTP status, WeCom
// error code (doc path 91144; 0 where WeCom has none) and metric label.
// errorOutcome matches errors in this order. Codes we chose: a stale
// timestamp fails like a bad signature (-40001); an AgentID mismatch is the
// ReceiveId mismatch of the app (-40005).
var outcomes = [nOutcomes]struct {
	err    error
	status int
	code   int
	label  string
}{
	outOK:             {nil, http.StatusOK, 0, "ok"},
	outVerified:       {nil, http.StatusOK, 0, "verified"},
	outDuplicate:      {nil, http.StatusOK, 0, "duplicate"},
	outRateLimited:    {nil, http.StatusOK, 0, "rate_limited"},
	outIgnored:        {nil, http.StatusOK, 0, "ignored"},
	outNotRecorded:    {nil, http.StatusOK, 0, "not_recorded"},
	outLinkAuthorize:  {nil, http.StatusFound, 0, "link_authorize"},
	outLinkLanded:     {nil, http.StatusFound, 0, "link_landed"},
	outBadSignature:   {wxcrypt.ErrSignature, http.StatusUnauthorized, -40001, "bad_signature"},
	outStaleTimestamp: {ErrTimestamp, http.StatusUnauthorized, -40001, "stale_timestamp"},
	outReceiveID:      {wxcrypt.ErrReceiveID, http.StatusBadRequest, -40005, "receive_id"},
	outAgentID:        {ErrAgentID, http.StatusBadRequest, -40005, "agent_id"},
	outBadBase64:      {wxcrypt.ErrBase64, http.StatusBadRequest, -40010, "bad_base64"},
	outBadPadding:     {wxcrypt.ErrDecrypt, http.StatusBadRequest, -40007, "bad_padding"},
	outBadLength:      {wxcrypt.ErrBuffer, http.StatusBadRequest, -40008, "bad_length"},
	outBadXML:         {ErrBadXML, http.StatusBadRequest, -40002, "bad_xml"},
	outUnknownApp:     {ErrUnknownApp, http.StatusNotFound, 0, "unknown_app"},
	outTooLarge:       {ErrTooLarge, http.StatusRequestEntityTooLarge, 0, "too_large"},
	outBadRequest:     {ErrBadRequest, http.StatusBadRequest, 0, "bad_request"},
	outTimeout:        {ErrTimeout, http.StatusServiceUnavailable, 0, "timeout"},
	outDownstream:     {ErrDownstream, http.StatusServiceUnavailable, 0, "downstream"},
	outBadLink:        {ErrBadLink, http.StatusBadRequest, 0, "bad_link"},
	outLinkSignature:  {ErrLinkSignature, http.StatusForbidden, 0, "link_signature"},
	outInternal:       {nil, http.StatusInternalServerError, 0, "internal"},
}

// errorOutcome returns the outcome of a failed request.
func errorOutcome(err error) outcome {
	for o := outBadSignature; o < outInternal; o++ {
		if errors.Is(err, outcomes[o].err) {
			return o
		}
	}
	return outInternal
}
