package diff

import (
	"fmt"
	"math/rand"
	"strconv"
	"strings"
	"testing"
)

func TestUnified(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name          string
		before, after []byte
		want          string
		added, remove int
	}{
		{name: "equal", before: []byte("a\n"), after: []byte("a\n")},
		{name: "both nil", before: nil, after: nil},
		{
			name: "one line changed", before: []byte("1\n2\n3\n4\n5\n6\n7\n8\n"), after: []byte("1\n2\n3\n4\nfive\n6\n7\n8\n"),
			want:  "--- a/f.txt\n+++ b/f.txt\n@@ -2,7 +2,7 @@\n 2\n 3\n 4\n-5\n+five\n 6\n 7\n 8\n",
			added: 1, remove: 1,
		},
		{
			name: "new file", before: nil, after: []byte("a\nb\n"),
			want:  "--- /dev/null\n+++ b/f.txt\n@@ -0,0 +1,2 @@\n+a\n+b\n",
			added: 2,
		},
		{
			name: "new empty file", before: nil, after: []byte{},
			want: "--- /dev/null\n+++ b/f.txt\n",
		},
		{
			name: "deleted file", before: []byte("a\nb\n"), after: nil,
			want:   "--- a/f.txt\n+++ /dev/null\n@@ -1,2 +0,0 @@\n-a\n-b\n",
			remove: 2,
		},
		{
			name: "empty existing file filled", before: []byte{}, after: []byte("x\n"),
			want:  "--- a/f.txt\n+++ b/f.txt\n@@ -0,0 +1 @@\n+x\n",
			added: 1,
		},
		{
			name: "no trailing newline on both sides", before: []byte("a\nb"), after: []byte("a\nc"),
			want: "--- a/f.txt\n+++ b/f.txt\n@@ -1,2 +1,2 @@\n a\n-b\n\\ No newline at end of file\n" +
				"+c\n\\ No newline at end of file\n",
			added: 1, remove: 1,
		},
		{
			name: "newline added at end", before: []byte("a"), after: []byte("a\n"),
			want:  "--- a/f.txt\n+++ b/f.txt\n@@ -1 +1 @@\n-a\n\\ No newline at end of file\n+a\n",
			added: 1, remove: 1,
		},
		{
			name: "insertion at top", before: []byte("a\nb\nc\nd\ne\n"), after: []byte("new\na\nb\nc\nd\ne\n"),
			want:  "--- a/f.txt\n+++ b/f.txt\n@@ -1,3 +1,4 @@\n+new\n a\n b\n c\n",
			added: 1,
		},
		{
			name:   "two hunks",
			before: []byte(lines(1, 20)),
			after:  []byte(strings.Replace(strings.Replace(lines(1, 20), "2\n", "two\n", 1), "18\n", "", 1)),
			want: "--- a/f.txt\n+++ b/f.txt\n@@ -1,5 +1,5 @@\n 1\n-2\n+two\n 3\n 4\n 5\n" +
				"@@ -15,6 +15,5 @@\n 15\n 16\n 17\n-18\n 19\n 20\n",
			added: 1, remove: 2,
		},
		{
			name:   "close changes share a hunk",
			before: []byte(lines(1, 12)),
			after:  []byte(strings.Replace(strings.Replace(lines(1, 12), "3\n", "c\n", 1), "9\n", "i\n", 1)),
			want: "--- a/f.txt\n+++ b/f.txt\n@@ -1,12 +1,12 @@\n 1\n 2\n-3\n+c\n 4\n 5\n 6\n 7\n 8\n-9\n+i\n" +
				" 10\n 11\n 12\n",
			added: 2, remove: 2,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, added, removed := Unified("f.txt", tt.before, tt.after)
			if got != tt.want {
				t.Errorf("diff\n%s\nwant\n%s", got, tt.want)
			}
			if added != tt.added || removed != tt.remove {
				t.Errorf("counts +%d -%d, want +%d -%d", added, removed, tt.added, tt.remove)
			}
		})
	}
}

// lines returns "from\n...to\n".
func lines(from, to int) string {
	var b strings.Builder
	for i := from; i <= to; i++ {
		fmt.Fprintf(&b, "%d\n", i)
	}
	return b.String()
}

// TestDiffLinesMinimal checks on random inputs that the edit script turns a
// into b and is as short as a textbook LCS says it can be.
func TestScriptMinimal(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewSource(1))
	for iter := 0; iter < 2000; iter++ {
		a, b := randLines(rng), randLines(rng)
		ops := Script(a, b)
		checkScript(t, a, b, ops)
		changes := 0
		for _, op := range ops {
			if op.Kind != Keep {
				changes++
			}
		}
		if want := len(a) + len(b) - 2*lcsLen(a, b); changes != want {
			t.Fatalf("a=%q b=%q: %d changes, minimal is %d", a, b, changes, want)
		}
	}
}

// TestDiffLinesBudget checks that a diff too costly to minimise is still
// correct.
func TestLinesBudget(t *testing.T) {
	t.Parallel()
	var a, b []string
	for i := 0; i < 3000; i++ {
		a = append(a, strconv.Itoa(i%7)+"\n")
		b = append(b, strconv.Itoa(i%11)+"\n")
	}
	d := &differ{a: make([]int, len(a)), b: make([]int, len(b)), budget: 1000}
	for i := range a {
		d.a[i], _ = strconv.Atoi(strings.TrimSpace(a[i]))
		d.b[i], _ = strconv.Atoi(strings.TrimSpace(b[i]))
	}
	d.del, d.ins = make([]bool, len(a)), make([]bool, len(b))
	d.compare(0, len(a), 0, len(b))
	if d.budget >= 0 {
		t.Fatalf("budget not exhausted (%d left); the test does not exercise the fallback", d.budget)
	}
	// Rebuild b from the marks.
	var got []string
	i := 0
	for j := 0; j < len(b); j++ {
		if d.ins[j] {
			got = append(got, b[j])
			continue
		}
		for d.del[i] {
			i++
		}
		if a[i] != b[j] {
			t.Fatalf("kept a[%d]=%q paired with b[%d]=%q", i, a[i], j, b[j])
		}
		got = append(got, a[i])
		i++
	}
	if strings.Join(got, "") != strings.Join(b, "") {
		t.Fatal("marks do not rebuild b")
	}
}

func randLines(rng *rand.Rand) []string {
	n := rng.Intn(12)
	out := make([]string, n)
	for i := range out {
		out[i] = string(rune('a'+rng.Intn(4))) + "\n"
	}
	return out
}

// checkScript verifies that ops turn a into b.
func checkScript(t *testing.T, a, b []string, ops []Op) {
	t.Helper()
	var gotA, gotB []string
	for _, op := range ops {
		switch op.Kind {
		case Keep:
			if a[op.A] != b[op.B] {
				t.Fatalf("context line a[%d]=%q differs from b[%d]=%q", op.A, a[op.A], op.B, b[op.B])
			}
			gotA, gotB = append(gotA, a[op.A]), append(gotB, b[op.B])
		case Delete:
			gotA = append(gotA, a[op.A])
		case Insert:
			gotB = append(gotB, b[op.B])
		}
	}
	if strings.Join(gotA, "") != strings.Join(a, "") || strings.Join(gotB, "") != strings.Join(b, "") {
		t.Fatalf("script does not cover a=%q b=%q: %+v", a, b, ops)
	}
}

func lcsLen(a, b []string) int {
	dp := make([][]int, len(a)+1)
	for i := range dp {
		dp[i] = make([]int, len(b)+1)
	}
	for i := len(a) - 1; i >= 0; i-- {
		for j := len(b) - 1; j >= 0; j-- {
			if a[i] == b[j] {
				dp[i][j] = dp[i+1][j+1] + 1
			} else {
				dp[i][j] = max(dp[i+1][j], dp[i][j+1])
			}
		}
	}
	return dp[0][0]
}
