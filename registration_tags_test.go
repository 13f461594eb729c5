package yidu_test

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/yidu-io/yidu"
)

// TestAudienceTags: tags alone make an audience; they are sorted and
// unique after Validate; negative ids and more than MaxTags are refused
// naming audience.
func TestAudienceTags(t *testing.T) {
	now := time.Date(2026, 12, 3, 9, 0, 0, 0, time.UTC)
	many := make([]int64, yidu.MaxTags+1)
	for i := range many {
		many[i] = int64(i)
	}
	tests := []struct {
		name string
		tags []int64
		want []int64 // nil: refused
	}{
		{"sorted and unique", []int64{9, 3, 9, 0}, []int64{0, 3, 9}},
		{"negative", []int64{3, -1}, nil},
		{"too many", many, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := yidu.Registration{App: yidu.App{CorpID: "ww1", Name: "hr", AgentID: 1}, Title: "t", Audience: yidu.Audience{Tags: tt.tags}}
			err := r.Validate(now)
			if tt.want == nil {
				if !errors.Is(err, yidu.ErrInvalid) {
					t.Fatalf("Validate = %v; want ErrInvalid", err)
				}
				return
			}
			if err != nil || !slices.Equal(r.Audience.Tags, tt.want) {
				t.Errorf("Validate = %v, tags %v; want %v", err, r.Audience.Tags, tt.want)
			}
		})
	}
}
