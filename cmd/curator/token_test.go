package main

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestTokenShowAndRotate(t *testing.T) {
	f := newFakeManagement()
	path := startFakeCluster(t, f)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"token", "show", "worker"}, testToken("workersecret") + "\n"},
		{[]string{"token", "show", "manager"}, testToken("managersecret") + "\n"},
		{[]string{"token", "rotate", "worker"}, testToken("rotatedworker") + "\n"},
		{[]string{"token", "show", "worker"}, testToken("rotatedworker") + "\n"},
		{[]string{"token", "show", "manager"}, testToken("managersecret") + "\n"},
	} {
		got, err := runCLI(t, append([]string{"--config", path}, tc.args...)...)
		if err != nil {
			t.Fatalf("%v: %v", tc.args, err)
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("%v (-want +got):\n%s", tc.args, diff)
		}
	}
	want := []string{"GetToken worker", "GetToken manager", "RotateToken worker", "GetToken worker", "GetToken manager"}
	if diff := cmp.Diff(want, f.Calls()); diff != "" {
		t.Errorf("calls (-want +got):\n%s", diff)
	}
}
