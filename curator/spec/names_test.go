package spec

import (
	"strings"
	"testing"
)

// huge is a 100 KB value, as an operator once sent.
var huge = strings.Repeat("x", 100<<10)

func TestValidateNodeName(t *testing.T) {
	for _, tc := range []struct {
		name string
		ok   bool
	}{
		{"manager-1", true},
		{"a", true},
		{"web_01.zone-a", true},
		{"A9", true},
		{strings.Repeat("a", 63), true},
		{strings.Repeat("a", 64), false},
		{"", false},
		{"-lead", false},
		{"trail.", false},
		{"new\nline", false},
		{"tab\there", false},
		{"sp ace", false},
		{"slash/y", false},
		{"é", false},
		{huge, false},
	} {
		err := ValidateNodeName(tc.name)
		if (err == nil) != tc.ok {
			t.Errorf("ValidateNodeName(%s) = %v, want ok %v", QuoteShort(tc.name), err, tc.ok)
		}
		if err != nil && len(err.Error()) > 300 {
			t.Errorf("ValidateNodeName(%s): a %d-byte error; it must not echo the value", QuoteShort(tc.name), len(err.Error()))
		}
	}
}

func TestValidateLabel(t *testing.T) {
	for _, tc := range []struct {
		key, value string
		ok         bool
	}{
		{"tier", "web", true},
		{"example.com/zone", "a-1", true},
		{"k", "", true},
		{"", "v", false},
		{"k", "v/w", false},
		{"k", "new\nline", false},
		{"k\n", "v", false},
		{"k", huge, false},
		{huge, "v", false},
		{"k", strings.Repeat("v", 64), false},
	} {
		err := ValidateLabel(tc.key, tc.value)
		if (err == nil) != tc.ok {
			t.Errorf("ValidateLabel(%s, %s) = %v, want ok %v", QuoteShort(tc.key), QuoteShort(tc.value), err, tc.ok)
		}
		if err != nil && len(err.Error()) > 300 {
			t.Errorf("ValidateLabel(%s, %s): a %d-byte error; it must not echo the value", QuoteShort(tc.key), QuoteShort(tc.value), len(err.Error()))
		}
	}
}

func TestQuoteShort(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"abc", `"abc"`},
		{"a\nb", `"a\nb"`},
		{strings.Repeat("x", 64), `"` + strings.Repeat("x", 64) + `"`},
		{strings.Repeat("x", 65), `"` + strings.Repeat("x", 64) + `"... (65 bytes)`},
		{huge, `"` + strings.Repeat("x", 64) + `"... (102400 bytes)`},
		// Never cut inside a character.
		{strings.Repeat("x", 63) + "éé", `"` + strings.Repeat("x", 63) + `"... (67 bytes)`},
	} {
		if got := QuoteShort(tc.in); got != tc.want {
			t.Errorf("QuoteShort(%d bytes) = %s, want %s", len(tc.in), got, tc.want)
		}
	}
}

func TestCheckMaxVoters(t *testing.T) {
	for _, tc := range []struct {
		n       uint32
		ok      bool
		warning bool
	}{
		{0, false, false}, {1, true, false}, {2, true, true}, {3, true, false}, {4, true, true},
		{5, true, false}, {6, true, true}, {7, true, false}, {8, false, true}, {9, false, false}, {15, false, false},
	} {
		err := CheckMaxVoters(tc.n)
		if (err == nil) != tc.ok {
			t.Errorf("CheckMaxVoters(%d) = %v, want ok %v", tc.n, err, tc.ok)
		}
		if tc.ok {
			if got := MaxVotersWarning(tc.n) != ""; got != tc.warning {
				t.Errorf("MaxVotersWarning(%d) = %q, want a warning: %v", tc.n, MaxVotersWarning(tc.n), tc.warning)
			}
		}
	}
	if err := CheckMaxVoters(8); err == nil || !strings.Contains(err.Error(), "3, 5 or 7") || !strings.Contains(err.Error(), "majority") {
		t.Errorf("CheckMaxVoters(8) = %v: want it to say why (majority) and what is usual (3, 5 or 7)", err)
	}
}

// The even-voters warnings say how many failures are tolerated, in words
// that cannot be read as one more than the truth.
func TestEvenVotersWarning(t *testing.T) {
	for _, tc := range []struct {
		n    int
		want string
	}{
		{1, ""},
		{2, "2 voters tolerate no failure, as 1 would (a majority of 2 is 2); promote or demote one manager"},
		{3, ""},
		{4, "4 voters tolerate 1 failure, as 3 would (a majority of 4 is 3); promote or demote one manager"},
		{6, "6 voters tolerate 2 failures, as 5 would (a majority of 6 is 4); promote or demote one manager"},
	} {
		if got := EvenVotersWarning(tc.n); got != tc.want {
			t.Errorf("EvenVotersWarning(%d) = %q, want %q", tc.n, got, tc.want)
		}
	}
	if got, want := MaxVotersWarning(4), "max voters is 4, an even number: 4 voters tolerate 1 failure, as 3 would"; !strings.HasPrefix(got, want) {
		t.Errorf("MaxVotersWarning(4) = %q, want it to start %q", got, want)
	}
}
