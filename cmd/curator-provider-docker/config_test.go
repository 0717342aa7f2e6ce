package main

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/curatorproject/curator/provider/docker"
)

func TestParseConfig(t *testing.T) {
	for _, tc := range []struct {
		name    string
		config  map[string]string
		want    docker.Config
		wantErr []string
	}{
		{name: "empty: the defaults", config: map[string]string{}},
		{
			name:   "one engine",
			config: map[string]string{"host": "unix:///run/d.sock", "image": "curator:v2", "network": "n", "subnet": "172.30.5.0/24", "port": "7100", "timeout": "2m"},
			want:   docker.Config{Host: "unix:///run/d.sock", Image: "curator:v2", Network: "n", Subnet: "172.30.5.0/24", Port: 7100},
		},
		{
			name:   "engines",
			config: map[string]string{"engines": " a=unix:///run/a.sock,172.31.1.0/24  b=tcp://10.0.0.2:2375 ", "list-timeout": "3s"},
			want: docker.Config{ListTimeout: 3 * time.Second, Engines: map[string]docker.Engine{
				"a": {Host: "unix:///run/a.sock", Subnet: "172.31.1.0/24"},
				"b": {Host: "tcp://10.0.0.2:2375"},
			}},
		},
		{name: "unknown key", config: map[string]string{"imgae": "x"}, wantErr: []string{"imgae: not a key of the docker plugin"}},
		{name: "bad port", config: map[string]string{"port": "seven"}, wantErr: []string{`port: want a number, got "seven"`}},
		{name: "bad list timeout", config: map[string]string{"list-timeout": "-1s"}, wantErr: []string{"list-timeout: want a positive duration"}},
		{name: "engine without host", config: map[string]string{"engines": "a="}, wantErr: []string{`engines: "a=": want DOMAIN=HOST`}},
		{name: "domain twice", config: map[string]string{"engines": "a=unix:///x a=unix:///y"}, wantErr: []string{"engines: domain a named twice"}},
		{name: "empty engines", config: map[string]string{"engines": " "}, wantErr: []string{"engines: empty"}},
		{name: "host and engines", config: map[string]string{"host": "unix:///x", "engines": "a=unix:///y"}, wantErr: []string{"host and engines: name one engine or several"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseConfig(tc.config)
			if len(tc.wantErr) == 0 {
				if err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(tc.want, got); diff != "" {
					t.Errorf("parseConfig (-want +got):\n%s", diff)
				}
				return
			}
			for _, want := range tc.wantErr {
				if err == nil || !strings.Contains(err.Error(), want) {
					t.Errorf("parseConfig: %v; want %q", err, want)
				}
			}
		})
	}
}

// TestNewProviderRefuses: what docker.Config.Validate refuses (a subnet
// that is not one) is refused by the plugin's constructor, so by
// Configure, with the reason.
func TestNewProviderRefuses(t *testing.T) {
	_, err := newProvider(map[string]string{"subnet": "172.30.5.1/24"})
	if err == nil || !strings.Contains(err.Error(), "host bits set") {
		t.Errorf("newProvider with a bad subnet: %v", err)
	}
	_, err = newProvider(map[string]string{"engines": "a=unix:///x b=unix:///x"})
	if err == nil || !strings.Contains(err.Error(), "are one engine") {
		t.Errorf("newProvider with one engine twice: %v", err)
	}
}
