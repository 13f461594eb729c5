package kafkatest

import (
	"encoding/base64"
	"testing"
)

// TestClusterIDNeverAnOption: kafka-storage format reads an id that
// starts with '-' as an option and refuses ("expected one argument"),
// which failed one CI run in 64. Every id is 16 bytes of base64 URL and
// none starts with '-'.
func TestClusterIDNeverAnOption(t *testing.T) {
	for i := 0; i < 20000; i++ {
		id := newClusterID()
		if id[0] == '-' {
			t.Fatalf("cluster id %q starts with '-'", id)
		}
		b, err := base64.RawURLEncoding.DecodeString(id)
		if err != nil || len(b) != 16 {
			t.Fatalf("cluster id %q: %d bytes, %v", id, len(b), err)
		}
	}
}
