package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// TestRoundSave: every evidence file of a round lands in its EvidenceDir
// under the name asked, and a directory that is not there is an error.
func TestRoundSave(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name    string
		dir     string
		file    string
		wantErr bool
	}{
		{"pack", dir, "m1-evidence.zip", false},
		{"record", dir, "evidence-alice.json", false},
		{"no such directory", filepath.Join(dir, "gone"), "evidence-alice.pdf", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := &Round{EvidenceDir: tt.dir}
			b := []byte("bytes of " + tt.file)
			path, err := r.save(tt.file, b)
			if tt.wantErr {
				if err == nil {
					t.Errorf("save(%q) in %s = %q, nil; want an error", tt.file, tt.dir, path)
				}
				return
			}
			if want := filepath.Join(tt.dir, tt.file); err != nil || path != want {
				t.Fatalf("save(%q) = %q, %v; want %q", tt.file, path, err, want)
			}
			if got, err := os.ReadFile(path); err != nil || !bytes.Equal(got, b) {
				t.Errorf("%s holds %q, %v; want %q", path, got, err, b)
			}
		})
	}
}

// TestCheckZIPRefusesNotAZIP: the demo's check is evidence.Check's.
func TestCheckZIPRefusesNotAZIP(t *testing.T) {
	m := &Main{}
	if rep, err := m.checkZIP([]byte("not a zip")); err == nil {
		t.Errorf("checkZIP(not a zip) = %+v, nil; want an error", rep)
	}
}
