package process

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestAddressRange(t *testing.T) {
	for _, tc := range []struct {
		in      string
		n       int
		want    []string
		wantErr bool
	}{
		{"127.0.150.10-127.0.150.12", 3, []string{"127.0.150.10", "127.0.150.11", "127.0.150.12"}, false},
		{"127.0.150.255-127.0.151.1", 2, []string{"127.0.150.255", "127.0.151.0"}, false},
		{"127.0.150.10-127.0.150.11", 3, nil, true},
		{"127.0.150.10", 1, nil, true},
		{"127.0.150.12-127.0.150.10", 1, nil, true},
		{"::1-::2", 1, nil, true},
	} {
		got, err := AddressRange(tc.in, tc.n)
		if (err != nil) != tc.wantErr {
			t.Errorf("AddressRange(%q, %d): err %v, want error %v", tc.in, tc.n, err, tc.wantErr)
			continue
		}
		var gotS []string
		for _, a := range got {
			gotS = append(gotS, a.String())
		}
		if diff := cmp.Diff(tc.want, gotS); diff != "" {
			t.Errorf("AddressRange(%q, %d) (-want +got):\n%s", tc.in, tc.n, diff)
		}
	}
}

func TestSplitRange(t *testing.T) {
	for _, tc := range []struct {
		in      string
		n       int
		want    []string
		wantErr string
	}{
		{"127.0.183.10-127.0.183.39", 3, []string{"127.0.183.10-127.0.183.19", "127.0.183.20-127.0.183.29", "127.0.183.30-127.0.183.39"}, ""},
		{"127.0.183.10-127.0.183.20", 2, []string{"127.0.183.10-127.0.183.15", "127.0.183.16-127.0.183.20"}, ""},
		{"127.0.182.250-127.0.183.3", 2, []string{"127.0.182.250-127.0.182.254", "127.0.182.255-127.0.183.3"}, ""},
		{"127.0.183.10-127.0.183.12", 3, []string{"127.0.183.10-127.0.183.10", "127.0.183.11-127.0.183.11", "127.0.183.12-127.0.183.12"}, ""},
		{"127.0.183.10-127.0.183.11", 3, nil, "2 addresses cannot be split into 3 ranges"},
		{"127.0.183.10-127.0.183.11", 0, nil, "cannot be split into 0"},
		{"127.0.183.10", 2, nil, "want FIRST-LAST"},
	} {
		got, err := SplitRange(tc.in, tc.n)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("SplitRange(%q, %d) = %v, %v; want an error with %q", tc.in, tc.n, got, err, tc.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("SplitRange(%q, %d): %v", tc.in, tc.n, err)
			continue
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("SplitRange(%q, %d) (-want +got):\n%s", tc.in, tc.n, diff)
		}
	}
}
