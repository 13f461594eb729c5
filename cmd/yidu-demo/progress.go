package main

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"
)

// status is one look at the notice: the dashboard's numbers (Redis), the
// archive's (MySQL) and what WeCom's player has done.
type status struct {
	Elapsed    time.Duration
	Recipients int64
	Dashboard  int64
	MySQL      int64
	// Expected is the number of distinct employees who read, once played.
	Expected int
	counts
	// Err is why the last look failed, if it did.
	Err error
}

// Exact reports whether every read that will happen is on the dashboard
// and in MySQL, and nothing more.
func (s status) Exact() bool {
	return s.Err == nil && s.Finished && s.Failures == 0 &&
		s.Dashboard == int64(s.Expected) && s.MySQL == int64(s.Expected)
}

// String is the one-line summary (without the bar).
func (s status) String() string {
	line := fmt.Sprintf("dashboard %d/%d read, MySQL %d, %d readers expected; %d callbacks sent (%d duplicates, %d retries, %d failed); %d cards acknowledged to the member",
		s.Dashboard, s.Recipients, s.MySQL, s.Expected, s.Sent, s.Duplicates, s.Retries, s.Failures, s.Replies)
	if s.BadReplies > 0 {
		line += fmt.Sprintf(", %d replies WeCom could not use", s.BadReplies)
	}
	if s.Err != nil {
		line += "; last poll: " + s.Err.Error()
	}
	return line
}

// bar renders s as a progress bar line for a terminal of about 100 columns.
func (s status) bar() string {
	const width = 24
	frac := 0.0
	if s.Recipients > 0 {
		frac = float64(s.Dashboard) / float64(s.Recipients)
	}
	n := min(width, int(frac*width+0.5))
	line := fmt.Sprintf("[%s%s] %d/%d read %5.1f%% │ MySQL %d │ %s │ callbacks %d, %d retried, %d dup, %d acked",
		strings.Repeat("█", n), strings.Repeat("░", width-n), s.Dashboard, s.Recipients, frac*100,
		s.MySQL, s.Elapsed.Round(time.Second), s.Sent, s.Retries, s.Duplicates, s.Replies)
	if s.Err != nil {
		line += " │ poll failed"
	}
	return line
}

// progress polls the notice about once a second, draws the bar and says
// when the run is done: exact, or failed.
type progress struct {
	out      io.Writer
	tty      bool
	msgID    string
	db       *sql.DB
	api      func(ctx context.Context, method, path string, body, out any) (int, error)
	player   *player
	expected int
	start    time.Time

	// done is closed when the run is exact or has failed; err says which.
	done chan struct{}

	mu      sync.Mutex
	cur     status
	failure error
	quiet   bool
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

func (p *progress) run(ctx context.Context) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for n := 0; ; n++ {
		s := p.poll(ctx)
		if ctx.Err() != nil {
			return
		}
		p.mu.Lock()
		p.cur = s
		quiet := p.quiet
		p.mu.Unlock()
		fail := p.check(s)
		if !quiet {
			switch {
			case p.tty:
				fmt.Fprintf(p.out, "\r%s\x1b[K", s.bar())
			case n%5 == 0 || s.Exact() || fail != nil:
				fmt.Fprintln(p.out, s.bar())
			}
		}
		if s.Exact() || fail != nil {
			p.mu.Lock()
			p.failure = fail
			p.mu.Unlock()
			if p.tty && !quiet {
				fmt.Fprintln(p.out)
			}
			if fail == nil && !quiet {
				fmt.Fprintf(p.out, "Filled up: all %d reads on the dashboard and in MySQL (%d of %d employees), %s after the send.\n",
					s.Expected, s.Dashboard, s.Recipients, s.Elapsed.Round(time.Second))
			}
			close(p.done)
			return
		}
		select {
		case <-t.C:
		case <-ctx.Done():
			return
		}
	}
}

// check returns why the run can no longer become exact, if it cannot.
func (p *progress) check(s status) error {
	switch {
	case !s.Finished:
		return nil
	case s.Failures > 0:
		return fmt.Errorf("%d callbacks were never answered 200: %s", s.Failures, s)
	case s.BadReplies > 0:
		// The member's card would not have changed: WeCom drops such a reply.
		return fmt.Errorf("%d passive replies WeCom could not use: %s", s.BadReplies, s)
	case s.Err == nil && (s.Dashboard > int64(s.Expected) || s.MySQL > int64(s.Expected)):
		// A read never goes back to unread: more than expected stays wrong.
		return fmt.Errorf("more reads than readers: %s", s)
	}
	return nil
}

func (p *progress) poll(ctx context.Context) status {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	s := status{Elapsed: time.Since(p.start), Expected: p.expected}
	s.Err = p.numbers(ctx, &s)
	// Taken after the numbers, so the callbacks shown are at least those the
	// numbers can reflect. Finished may then be newer than the numbers,
	// which only delays Exact by a poll: a read set never shrinks.
	s.counts = p.player.counts()
	return s
}

// numbers fills in the dashboard's and MySQL's counts.
func (p *progress) numbers(ctx context.Context, s *status) error {
	var pr struct {
		Recipients int64 `json:"recipients"`
		Read       int64 `json:"read"`
	}
	if _, err := p.api(ctx, http.MethodGet, "/messages/"+p.msgID+"/progress", nil, &pr); err != nil {
		return fmt.Errorf("dashboard: %w", err)
	}
	s.Recipients, s.Dashboard = pr.Recipients, pr.Read
	err := p.db.QueryRowContext(ctx, "SELECT COUNT(*) FROM message_read_record WHERE corp_id = ? AND msgid = ? AND is_read = 1",
		demoCorp, p.msgID).Scan(&s.MySQL)
	if err != nil {
		return fmt.Errorf("mysql: %w", err)
	}
	return nil
}

// stop ends the drawing (the process is shutting down); polling goes on
// until the context ends.
func (p *progress) stop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.quiet = true
}

func (p *progress) last() status {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cur
}

func (p *progress) err() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.failure
}
