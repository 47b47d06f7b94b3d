package github_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/wrenchworks/wrench/github"
)

// BenchmarkPublish measures one resolved publish against the stand-in:
// fetch (or reuse) the repository, apply the patch, push the branch, open
// the pull request, comment on the issue.
func BenchmarkPublish(b *testing.B) {
	for _, cache := range []bool{false, true} {
		b.Run(fmt.Sprintf("cache=%v", cache), func(b *testing.B) {
			dir := ""
			if cache {
				dir = b.TempDir()
			}
			f := newFixture(b, func(c *github.PublisherConfig) { c.CacheDir = dir })
			res := f.result(b, "bench")
			b.ResetTimer()
			for i := range b.N {
				tk := f.task(fmt.Sprintf("gh-bench-%d", i), i+1)
				r := res
				r.TaskID = tk.ID
				if _, err := f.pub.Publish(context.Background(), tk, r); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
