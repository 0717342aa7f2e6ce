package spec

import (
	"errors"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	pb "github.com/curatorproject/curator/proto"
)

func TestCheckCertTTL(t *testing.T) {
	for _, tc := range []struct {
		ttl  time.Duration
		want string // "" for none
	}{
		{MinCertTTL, ""},
		{DefaultCertTTL, ""},
		{MaxCertTTL, ""},
		{MinCertTTL - time.Millisecond, "shorter than the minimum"},
		{0, "shorter than the minimum"},
		{-time.Hour, "shorter than the minimum"},
		{MaxCertTTL + time.Second, "longer than the maximum"},
	} {
		err := CheckCertTTL(tc.ttl)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("CheckCertTTL(%v) = %v, want none", tc.ttl, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want) || !errors.Is(err, ErrInvalid)):
			t.Errorf("CheckCertTTL(%v) = %v, want ErrInvalid saying %q", tc.ttl, err, tc.want)
		}
	}
}

func TestCertTTLDefault(t *testing.T) {
	for _, tc := range []struct {
		cs   *pb.ClusterState
		want time.Duration
	}{
		{&pb.ClusterState{}, DefaultCertTTL},
		{&pb.ClusterState{CertTtl: durationpb.New(0)}, DefaultCertTTL},
		{&pb.ClusterState{CertTtl: durationpb.New(time.Minute)}, time.Minute},
	} {
		if got := CertTTL(tc.cs); got != tc.want {
			t.Errorf("CertTTL(%v) = %v, want %v", tc.cs, got, tc.want)
		}
	}
}
