package dispatcher

import "testing"

func TestRepoKey(t *testing.T) {
	same := [][]string{
		{"https://github.com/Org/Repo", "https://github.com/org/repo.git", " https://github.com/org/repo/ ", "https://github.com/org/repo.git/"},
		{"/srv/repos/calc", "file:///srv/repos/calc", "/srv/repos/calc/.git", "file:///srv/repos/calc/"},
	}
	for _, group := range same {
		for _, u := range group[1:] {
			if repoKey(u) != repoKey(group[0]) {
				t.Errorf("repoKey(%q) = %q, want %q as for %q", u, repoKey(u), repoKey(group[0]), group[0])
			}
		}
	}
	if repoKey("https://github.com/org/repo") == repoKey("https://github.com/org/repo2") {
		t.Error("two repositories share a key")
	}
}
