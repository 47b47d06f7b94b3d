package bench

import (
	"fmt"
	"io"
	"math"
	"sort"
	"strings"
)

// Comparison is `wrench bench compare A B`: two runs on the same instances.
type Comparison struct {
	A, B string
	// Paired counts the instances both runs have; the 2x2 table of their
	// outcomes is BothResolved, OnlyA, OnlyB, Neither.
	Paired       int `json:"paired"`
	BothResolved int `json:"both_resolved"`
	OnlyA        int `json:"only_a"`
	OnlyB        int `json:"only_b"`
	Neither      int `json:"neither"`
	// RateA and RateB are the resolved rates on the paired instances.
	RateA float64 `json:"rate_a"`
	RateB float64 `json:"rate_b"`
	// Diff is RateB - RateA; [Low, High] its 95% confidence interval by
	// Newcombe's hybrid score method for paired proportions.
	Diff float64 `json:"diff"`
	Low  float64 `json:"ci95_low"`
	High float64 `json:"ci95_high"`
	// Fixed are the instances B resolves and A does not; Broken the
	// reverse (the flips).
	Fixed  []string `json:"fixed"`
	Broken []string `json:"broken"`
	// OnlyInA and OnlyInB are the instances one run lacks (not paired).
	OnlyInA []string `json:"only_in_a,omitempty"`
	OnlyInB []string `json:"only_in_b,omitempty"`
}

// Compare pairs the results of two runs by instance id.
func Compare(nameA string, a []Result, nameB string, b []Result) Comparison {
	c := Comparison{A: nameA, B: nameB, Fixed: []string{}, Broken: []string{}}
	ra := map[string]bool{}
	for _, x := range a {
		ra[x.InstanceID] = x.Resolved
	}
	inB := map[string]bool{}
	for _, y := range b {
		inB[y.InstanceID] = true
		xa, ok := ra[y.InstanceID]
		if !ok {
			c.OnlyInB = append(c.OnlyInB, y.InstanceID)
			continue
		}
		c.Paired++
		switch {
		case xa && y.Resolved:
			c.BothResolved++
		case xa:
			c.OnlyA++
			c.Broken = append(c.Broken, y.InstanceID)
		case y.Resolved:
			c.OnlyB++
			c.Fixed = append(c.Fixed, y.InstanceID)
		default:
			c.Neither++
		}
	}
	for _, x := range a {
		if !inB[x.InstanceID] {
			c.OnlyInA = append(c.OnlyInA, x.InstanceID)
		}
	}
	for _, l := range [][]string{c.Fixed, c.Broken, c.OnlyInA, c.OnlyInB} {
		sort.Strings(l)
	}
	if c.Paired > 0 {
		n := float64(c.Paired)
		c.RateA = float64(c.BothResolved+c.OnlyA) / n
		c.RateB = float64(c.BothResolved+c.OnlyB) / n
		c.Diff = c.RateB - c.RateA
		c.Low, c.High = PairedDiffCI(c.BothResolved, c.OnlyB, c.OnlyA, c.Neither, 1.959964)
	}
	return c
}

// PairedDiffCI is the confidence interval of p1 - p2 for paired binary
// outcomes by Newcombe's hybrid score method (method 10 of Newcombe 1998,
// "Improved confidence intervals for the difference between binomial
// proportions based on paired data", as worked in Altman et al.,
// "Statistics with Confidence", 2000): Wilson score intervals of the two
// marginal proportions, combined with the phi correlation of the pairs.
// In the 2x2 table a counts pairs where both succeed, b only the first,
// c only the second, d neither; p1 = (a+b)/n, p2 = (a+c)/n. z is the
// normal quantile (1.96 for 95%). Unlike a Wald interval it stays within
// [-1, 1] and is sensible at 0% and 100%.
func PairedDiffCI(a, b, c, d int, z float64) (low, high float64) {
	n := float64(a + b + c + d)
	if n == 0 {
		return -1, 1
	}
	p1, p2 := float64(a+b)/n, float64(a+c)/n
	l1, u1 := wilson(float64(a+b), n, z)
	l2, u2 := wilson(float64(a+c), n, z)
	// phi is the correlation of the pairs, with Newcombe's correction: a
	// positive ad-bc is reduced by n/2 (and not below 0).
	phi := 0.0
	if den := float64(a+b) * float64(c+d) * float64(a+c) * float64(b+d); den > 0 {
		num := float64(a)*float64(d) - float64(b)*float64(c)
		switch {
		case num > n/2:
			num -= n / 2
		case num > 0:
			num = 0
		}
		phi = num / math.Sqrt(den)
	}
	diff := p1 - p2
	dl := math.Sqrt(math.Max(0, sq(p1-l1)-2*phi*(p1-l1)*(u2-p2)+sq(u2-p2)))
	du := math.Sqrt(math.Max(0, sq(u1-p1)-2*phi*(u1-p1)*(p2-l2)+sq(p2-l2)))
	return math.Max(-1, diff-dl), math.Min(1, diff+du)
}

// wilson is the Wilson score interval of k successes in n.
func wilson(k, n, z float64) (float64, float64) {
	p := k / n
	den := 1 + z*z/n
	center := (p + z*z/(2*n)) / den
	half := z * math.Sqrt(p*(1-p)/n+z*z/(4*n*n)) / den
	return math.Max(0, center-half), math.Min(1, center+half)
}

func sq(x float64) float64 { return x * x }

// WriteText writes the comparison for a person.
func (c Comparison) WriteText(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "A: %s\nB: %s\n\n", c.A, c.B)
	fmt.Fprintf(&b, "paired instances: %d (both resolved %d, only A %d, only B %d, neither %d)\n", c.Paired, c.BothResolved, c.OnlyA, c.OnlyB, c.Neither)
	fmt.Fprintf(&b, "resolved: A %.1f%%, B %.1f%%\n", 100*c.RateA, 100*c.RateB)
	fmt.Fprintf(&b, "B - A: %+.1f points, 95%% CI [%+.1f, %+.1f] (Newcombe, paired)\n", 100*c.Diff, 100*c.Low, 100*c.High)
	list := func(title string, ids []string) {
		if len(ids) == 0 {
			return
		}
		fmt.Fprintf(&b, "\n%s (%d):\n", title, len(ids))
		for _, id := range ids {
			fmt.Fprintf(&b, "  %s\n", id)
		}
	}
	list("resolved by B only (A✗ → B✓)", c.Fixed)
	list("resolved by A only (A✓ → B✗)", c.Broken)
	list("only in A (not compared)", c.OnlyInA)
	list("only in B (not compared)", c.OnlyInB)
	_, err := io.WriteString(w, b.String())
	return err
}
