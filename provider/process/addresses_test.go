package process

import (
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
