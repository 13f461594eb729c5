// Package opt fills in the defaults of an Options struct the same way in
// every package: a number or duration left out (zero) or negative takes
// the package's default, a logger left out discards, a clock left out is
// time.Now.
package opt

import (
	"log/slog"
	"time"
)

// Number is what Positive defaults: integers, floats and time.Duration.
type Number interface {
	~int | ~int8 | ~int16 | ~int32 | ~int64 | ~uint | ~uint8 | ~uint16 | ~uint32 | ~uint64 | ~float32 | ~float64
}

// Positive sets *v to def unless *v is above zero.
func Positive[T Number](v *T, def T) {
	if *v <= 0 {
		*v = def
	}
}

// Logger sets *l, when nil, to a logger that discards every record.
func Logger(l **slog.Logger) {
	if *l == nil {
		*l = slog.New(slog.DiscardHandler)
	}
}

// Clock sets *now, when nil, to time.Now.
func Clock(now *func() time.Time) {
	if *now == nil {
		*now = time.Now
	}
}
