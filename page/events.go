package page

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/bitmap"
)

// The page's events (POST /r/<app>/<msgid>/events) and what they decide.
//
// Every page view hands the reader a view: a random token kept in Redis
// with who was shown which version of which notice and when. An event
// names its view and the version; the session cookie must be the view's
// reader. So an event is bound to a session (SameSite=Lax cookie, JSON
// body: a cross-site form cannot send it), to what the page showed, and
// to the time it was shown (min_read_seconds is checked here, not only
// in the browser).
//
// What a reader did on each version is kept in Redis beside the view
// (done:<signal>:<version>), written only once the signal is durable:
// an acknowledgement needs read_to_end of the same version first (Redis,
// else the archive, page_signals), and a second acknowledgement of a
// version is refused and writes nothing.

// Event errors, each a clear answer that writes nothing.
var (
	// ErrNoSession: the event came without a reader's session (401).
	ErrNoSession = errors.New("page: no session")
	// ErrUnknownView: the view named is not one this receiver handed out,
	// or it expired (403).
	ErrUnknownView = errors.New("page: unknown view")
	// ErrNotYourView: the view was handed to another reader or belongs to
	// another notice (403): someone else's event.
	ErrNotYourView = errors.New("page: the view is another reader's")
	// ErrVersionNotShown: the event names a version the view did not
	// show (409).
	ErrVersionNotShown = errors.New("page: version not shown")
	// ErrNotReadToEnd: an acknowledgement before read_to_end of the same
	// version (409).
	ErrNotReadToEnd = errors.New("page: not read to the end")
	// ErrTooSoon: an acknowledgement before the notice's
	// min_read_seconds on the page (409).
	ErrTooSoon = errors.New("page: acknowledged too soon")
	// ErrAlreadyAcknowledged: a replayed acknowledgement of a version
	// (409).
	ErrAlreadyAcknowledged = errors.New("page: already acknowledged")
	// ErrBadEvent: the body names no known event (400).
	ErrBadEvent = errors.New("page: bad event")
)

// Archive answers what MySQL holds of a member's page signals when Redis
// lacks it (tracker.Registry, page_signals).
type Archive interface {
	HasPageSignal(ctx context.Context, corpID, msgID string, uid uint32, sig yidu.Signal, version int) (bool, error)
}

// view is what a page view handed out, kept under its token.
type view struct {
	App     string `json:"app"`
	Corp    string `json:"corp"`
	MsgID   string `json:"msgid"`
	UserID  string `json:"userid"`
	UID     uint32 `json:"uid"`
	Version int    `json:"v"`
	// ShownMs is when the page was served (unix ms); MinRead the
	// notice's min_read_seconds then.
	ShownMs int64 `json:"shown"`
	MinRead int   `json:"min_read"`
	// Material is the notice's current material version when the page
	// was served: an acknowledgement of an older version is archived and
	// does not count (yidu.ReadRule.Acknowledging).
	Material int `json:"material,omitempty"`
}

// Event is one event the reading page posts.
type Event struct {
	// Signal is read_to_end or acknowledged.
	Signal  yidu.Signal
	View    string
	Version int
	// IP and UserAgent are the request's (RemoteAddr: no proxy header is
	// trusted).
	IP, UserAgent string
}

// ParseEvent decodes an event's body: {"event": "read_to_end" |
// "acknowledged", "version": N, "view": "<token>"}, nothing else.
func ParseEvent(body []byte) (Event, error) {
	var b struct {
		Event   string `json:"event"`
		Version int    `json:"version"`
		View    string `json:"view"`
	}
	if err := strictJSON(body, &b); err != nil {
		return Event{}, fmt.Errorf("%w: %w", ErrBadEvent, err)
	}
	var ev Event
	switch b.Event {
	case "read_to_end":
		ev.Signal = yidu.SignalReadToEnd
	case "acknowledged":
		ev.Signal = yidu.SignalAcknowledged
	default:
		return Event{}, fmt.Errorf("%w: event %q", ErrBadEvent, yidu.Truncate(b.Event, 32))
	}
	if b.Version < 1 || b.Version > 1<<31-1 {
		return Event{}, fmt.Errorf("%w: version %d", ErrBadEvent, b.Version)
	}
	if b.View == "" || len(b.View) > 64 {
		return Event{}, fmt.Errorf("%w: view", ErrBadEvent)
	}
	ev.Version, ev.View = b.Version, b.View
	return ev, nil
}

func strictJSON(body []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("trailing data")
	}
	return nil
}

func (s *Server) viewKey(token string) string {
	sum := sha256.Sum256([]byte(token))
	return s.opts.Prefix + "page:view:" + hex.EncodeToString(sum[:])
}

func (s *Server) doneKey(corp, msgID, userID string) string {
	return s.opts.Prefix + "page:done:{" + corp + "/" + msgID + "}:" + userID
}

func doneField(sig yidu.Signal, version int) string {
	return sig.String() + ":" + strconv.Itoa(version)
}

// beginView hands out a view of version n to the reader and returns its
// token and what the reader already did on n (read_to_end,
// acknowledged).
func (s *Server) beginView(ctx context.Context, v view) (token string, ended, acked bool, err error) {
	var b [24]byte
	_, _ = rand.Read(b[:])
	token = base64.RawURLEncoding.EncodeToString(b[:])
	raw, _ := json.Marshal(v)
	var done *redis.SliceCmd
	_, err = s.opts.Redis.Pipelined(ctx, func(p redis.Pipeliner) error {
		p.Set(ctx, s.viewKey(token), raw, s.opts.SessionTTL)
		done = p.HMGet(ctx, s.doneKey(v.Corp, v.MsgID, v.UserID), doneField(yidu.SignalReadToEnd, v.Version), doneField(yidu.SignalAcknowledged, v.Version))
		return nil
	})
	if err != nil {
		return "", false, false, fmt.Errorf("page: view: %w", err)
	}
	vals := done.Val()
	return token, len(vals) == 2 && vals[0] != nil, len(vals) == 2 && vals[1] != nil, nil
}

// record decides and records one event of the reader signed in as sess
// (see the errors); it returns once the signal is durable.
func (s *Server) record(ctx context.Context, sess session, a App, msgID string, ev Event) error {
	raw, err := s.opts.Redis.Get(ctx, s.viewKey(ev.View)).Bytes()
	if errors.Is(err, redis.Nil) {
		return ErrUnknownView
	}
	if err != nil {
		return fmt.Errorf("page: view: %w", err)
	}
	var v view
	if err := json.Unmarshal(raw, &v); err != nil {
		return fmt.Errorf("page: view: %w", err)
	}
	if v.UserID != sess.UserID || v.Corp != sess.Corp || v.Corp != a.CorpID || v.App != a.Name || v.MsgID != msgID {
		return ErrNotYourView
	}
	if v.Version != ev.Version {
		return ErrVersionNotShown
	}
	done := s.doneKey(v.Corp, v.MsgID, v.UserID)
	vals, err := s.opts.Redis.HMGet(ctx, done, doneField(yidu.SignalReadToEnd, v.Version), doneField(yidu.SignalAcknowledged, v.Version)).Result()
	if err != nil {
		return fmt.Errorf("page: done: %w", err)
	}
	ended, acked := vals[0] != nil, vals[1] != nil
	now := s.opts.Now()
	switch ev.Signal {
	case yidu.SignalReadToEnd:
		if ended {
			return nil // reached again: on record already
		}
	case yidu.SignalAcknowledged:
		if !acked {
			// Redis may have lost what flushd archived.
			if acked, err = s.archive.HasPageSignal(ctx, v.Corp, v.MsgID, v.UID, yidu.SignalAcknowledged, v.Version); err != nil {
				return err
			}
		}
		if acked {
			return ErrAlreadyAcknowledged
		}
		if !ended {
			if ended, err = s.archive.HasPageSignal(ctx, v.Corp, v.MsgID, v.UID, yidu.SignalReadToEnd, v.Version); err != nil {
				return err
			}
		}
		if !ended {
			return ErrNotReadToEnd
		}
		if now.Before(time.UnixMilli(v.ShownMs).Add(time.Duration(v.MinRead) * time.Second)) {
			return ErrTooSoon
		}
	default:
		return ErrBadEvent
	}
	if _, err := s.reads.PageSignal(ctx, ev.Signal, a.CorpID, a.AgentID, v.UserID, v.MsgID, now,
		bitmap.PageEvent{Version: v.Version, IP: ev.IP, UserAgent: ev.UserAgent,
			Stale: ev.Signal == yidu.SignalAcknowledged && v.Version < v.Material}); err != nil {
		return err
	}
	// Durable now; what follows only spares a replay its write (and
	// a lost mark falls back to the archive).
	if _, err := s.opts.Redis.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.HSet(ctx, done, doneField(ev.Signal, v.Version), now.Unix())
		p.Expire(ctx, done, s.opts.DoneTTL)
		return nil
	}); err != nil {
		s.log.WarnContext(ctx, "page: event recorded, its mark not kept", "err", err)
	}
	return nil
}
