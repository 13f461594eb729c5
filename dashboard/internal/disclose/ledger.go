package disclose

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/ledger"
)

// Log is what the dashboard asks of the evidence log
// (*ledger.Ledger): its newest signed checkpoint and consistency proofs
// between two, for auditors who keep checkpoints outside yidu.
type Log interface {
	LatestCheckpoint(ctx context.Context, corp string) (ledger.Checkpoint, bool, error)
	Consistency(ctx context.Context, corp string, size1, size2 uint64) (ledger.Consistency, error)
}

// checkpointJSON is a signed checkpoint as the API answers it.
type checkpointJSON struct {
	Origin string    `json:"origin"`
	Size   uint64    `json:"size"`
	Root   string    `json:"root"`
	Day    string    `json:"day,omitempty"`
	At     time.Time `json:"at"`
	Note   string    `json:"checkpoint"`
}

func checkpointOf(c ledger.Checkpoint) checkpointJSON {
	return checkpointJSON{Origin: c.Origin, Size: c.Size, Root: c.Root.String(), Day: c.Day, At: c.At, Note: c.Note}
}

// ledgerCorp is the {corp} of a ledger route if the caller administers
// it; otherwise it has answered (404 without a log, 403 for another
// corp's or a non-admin).
func (s *Handlers) ledgerCorp(w http.ResponseWriter, r *http.Request) (string, bool) {
	if s.Ledger == nil {
		writeError(w, http.StatusNotFound, "the evidence log is not configured")
		return "", false
	}
	corp := chi.URLParam(r, "corp")
	if !yidu.CorpID(corp).Valid() {
		writeFieldError(w, "corp", "corp: not a corp id")
		return "", false
	}
	corps, all := principalFrom(r.Context()).AdminCorps()
	if !all && !slices.Contains(corps, corp) {
		writeError(w, http.StatusForbidden, "the evidence log is for the corp's admins")
		return "", false
	}
	return corp, true
}

// HandleCheckpoint is GET /api/v1/ledger/{corp}/checkpoint: the corp's
// newest signed checkpoint (404 before its first).
func (s *Handlers) HandleCheckpoint(w http.ResponseWriter, r *http.Request) {
	corp, ok := s.ledgerCorp(w, r)
	if !ok {
		return
	}
	c, found, err := s.Ledger.LatestCheckpoint(r.Context(), corp)
	if err != nil {
		s.Fail(w, r, err)
		return
	}
	if !found {
		writeError(w, http.StatusNotFound, "no checkpoint yet")
		return
	}
	writeJSON(w, http.StatusOK, checkpointOf(c))
}

// HandleConsistency is GET /api/v1/ledger/{corp}/consistency?from=N[&to=M]:
// the checkpoints of sizes N and M (default the newest), signed, and the
// RFC 6962 proof that the first is a prefix of the second.
func (s *Handlers) HandleConsistency(w http.ResponseWriter, r *http.Request) {
	corp, ok := s.ledgerCorp(w, r)
	if !ok {
		return
	}
	q := r.URL.Query()
	from, err := strconv.ParseUint(q.Get("from"), 10, 64)
	if err != nil || from == 0 {
		writeFieldError(w, "from", "from: the size of a checkpoint, a positive integer")
		return
	}
	var to uint64
	if v := q.Get("to"); v != "" {
		if to, err = strconv.ParseUint(v, 10, 64); err != nil || to < from {
			writeFieldError(w, "to", "to: the size of a later checkpoint, not smaller than from")
			return
		}
	}
	c, err := s.Ledger.Consistency(r.Context(), corp, from, to)
	switch {
	case errors.Is(err, ledger.ErrNotFound):
		writeError(w, http.StatusNotFound, "no checkpoint of that size")
		return
	case errors.Is(err, ledger.ErrInvalid):
		writeFieldError(w, "from", "from: "+err.Error())
		return
	case err != nil:
		s.Fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, c.Doc())
}
