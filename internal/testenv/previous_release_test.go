package testenv

import (
	"strings"
	"testing"
)

func TestParsePreviousRelease(t *testing.T) {
	const hash = "0102c366cac20dbe393276a2a31ab74b77e4e946"
	for _, tc := range []struct {
		name, file string
		want       string // "" when the file is refused
	}{
		{"hash then comments", hash + "\n# the previous release\n", hash},
		{"comments and blanks first", "# the previous release\n\n  " + hash + "  \n", hash},
		{"no trailing newline", hash, hash},
		{"short hash", "0102c36\n", ""},
		{"upper case", strings.ToUpper(hash) + "\n", ""},
		{"a ref, not a hash", "main\n", ""},
		{"only comments", "# nothing\n\n", ""},
		{"empty", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParsePreviousRelease(strings.NewReader(tc.file))
			if tc.want == "" {
				if err == nil {
					t.Fatalf("ParsePreviousRelease(%q) = %q, want an error", tc.file, got)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("ParsePreviousRelease(%q) = %q, %v; want %q", tc.file, got, err, tc.want)
			}
		})
	}
}
