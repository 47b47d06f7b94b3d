package main

import (
	"reflect"
	"testing"
)

// The environment's git token is bound to its hosts: a task naming
// another host gets none.
func TestGitAuthIsScoped(t *testing.T) {
	for _, tc := range []struct {
		env       map[string]string
		wantToken string
		wantHosts []string
	}{
		{env: nil},
		{env: map[string]string{"GITHUB_TOKEN": "ghp_x"}, wantToken: "ghp_x", wantHosts: []string{"github.com"}},
		{env: map[string]string{"WRENCH_GIT_TOKEN": "glpat", "GITHUB_TOKEN": "ghp_x"}, wantToken: "glpat", wantHosts: []string{"github.com"}},
		{env: map[string]string{"WRENCH_GIT_TOKEN": "glpat", "WRENCH_GIT_TOKEN_HOSTS": "gitlab.com,git.example.com:8443"},
			wantToken: "glpat", wantHosts: []string{"gitlab.com", "git.example.com:8443"}},
	} {
		a := gitAuth(&cliEnv{getenv: func(k string) string { return tc.env[k] }})
		if tc.wantToken == "" {
			if a != nil {
				t.Errorf("%v: got a token", tc.env)
			}
			continue
		}
		if a == nil || a.Token != tc.wantToken || !reflect.DeepEqual(a.Hosts, tc.wantHosts) {
			t.Errorf("%v: got %+v hosts %v", tc.env, a, a.Hosts)
		}
	}
}
