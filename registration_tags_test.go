package yidu_test

import (
	"errors"
	"reflect"
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

// TestAudienceValidateIsRegistrations: the compose page's preview and a
// stored notice check an audience with Audience.Validate, a registration
// with Registration.Validate; both must refuse and canonicalize alike.
func TestAudienceValidateIsRegistrations(t *testing.T) {
	tests := []struct {
		name string
		a    yidu.Audience
	}{
		{"empty", yidu.Audience{}},
		{"userids", yidu.Audience{UserIDs: []string{"b", "a", "b"}}},
		{"bad userid", yidu.Audience{UserIDs: []string{"a b"}}},
		{"departments", yidu.Audience{Departments: []int64{3, 1, 3}}},
		{"bad department", yidu.Audience{Departments: []int64{0}}},
		{"bad tag", yidu.Audience{Tags: []int64{-1}}},
		{"tags", yidu.Audience{Tags: []int64{2, 2, 1}}},
		{"all", yidu.Audience{All: true}},
	}
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := tt.a
			aErr := a.Validate()
			r := yidu.Registration{MsgID: "m", App: yidu.App{Name: "hr", CorpID: "ww1", AgentID: 1}, Title: "t", Audience: tt.a}
			rErr := r.Validate(now)
			if (aErr == nil) != (rErr == nil) || aErr != nil && aErr.Error() != rErr.Error() {
				t.Fatalf("Audience.Validate = %v; Registration.Validate = %v", aErr, rErr)
			}
			if aErr == nil && !reflect.DeepEqual(a, r.Audience) {
				t.Errorf("Audience.Validate made %+v; Registration.Validate %+v", a, r.Audience)
			}
		})
	}
}
