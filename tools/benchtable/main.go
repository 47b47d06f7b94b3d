// Command benchtable turns `go test -bench` output into the table `make
// bench` prints: the median of every metric over the -count runs, and the
// ratios asked for with -ratio, each between two benchmarks of the same run.
//
//	go test -run '^$' -bench . -count 5 ./... | benchtable -ratio 'A/ours=A/baseline'
package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"
)

// ratioFlag collects -ratio NUM=DEN[@metric] pairs.
type ratioFlag []string

func (r *ratioFlag) String() string     { return strings.Join(*r, ",") }
func (r *ratioFlag) Set(v string) error { *r = append(*r, v); return nil }

func main() {
	var ratios ratioFlag
	flag.Var(&ratios, "ratio", "NUM=DEN[@metric]: print median(NUM)/median(DEN) (metric default ns/op); repeatable")
	flag.Parse()
	res, order, err := parse(os.Stdin)
	if err != nil {
		fmt.Fprintln(os.Stderr, "benchtable:", err)
		os.Exit(1)
	}
	write(os.Stdout, res, order, ratios)
}

// results maps benchmark name → metric unit → samples.
type results map[string]map[string][]float64

func parse(r io.Reader) (results, []string, error) {
	res := results{}
	var order []string
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 4 || !strings.HasPrefix(f[0], "Benchmark") {
			continue
		}
		if _, err := strconv.Atoi(f[1]); err != nil {
			continue
		}
		name := trimProcs(f[0])
		if res[name] == nil {
			res[name] = map[string][]float64{}
			order = append(order, name)
		}
		for i := 2; i+1 < len(f); i += 2 {
			v, err := strconv.ParseFloat(f[i], 64)
			if err != nil {
				continue
			}
			res[name][f[i+1]] = append(res[name][f[i+1]], v)
		}
	}
	return res, order, sc.Err()
}

// trimProcs drops the -GOMAXPROCS suffix go test adds.
func trimProcs(name string) string {
	if i := strings.LastIndexByte(name, '-'); i > 0 {
		if _, err := strconv.Atoi(name[i+1:]); err == nil {
			return name[:i]
		}
	}
	return name
}

func median(xs []float64) float64 {
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	n := len(s)
	if n == 0 {
		return 0
	}
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

func write(w io.Writer, res results, order []string, ratios []string) {
	fmt.Fprintln(w, "| benchmark | runs | median |")
	fmt.Fprintln(w, "|---|---|---|")
	for _, name := range order {
		units := make([]string, 0, len(res[name]))
		for u := range res[name] {
			units = append(units, u)
		}
		sort.Strings(units)
		var cells []string
		runs := 0
		for _, u := range units {
			cells = append(cells, human(median(res[name][u]), u))
			runs = max(runs, len(res[name][u]))
		}
		fmt.Fprintf(w, "| %s | %d | %s |\n", strings.TrimPrefix(name, "Benchmark"), runs, strings.Join(cells, ", "))
	}
	if len(ratios) == 0 {
		return
	}
	fmt.Fprintln(w, "\n| ratio (same run, medians) | value |")
	fmt.Fprintln(w, "|---|---|")
	for _, r := range ratios {
		metric := "ns/op"
		spec := r
		if i := strings.LastIndexByte(r, '@'); i > 0 {
			spec, metric = r[:i], r[i+1:]
		}
		num, den, ok := splitRatio(spec, res)
		a, b := res["Benchmark"+num][metric], res["Benchmark"+den][metric]
		if !ok || len(a) == 0 || len(b) == 0 || median(b) == 0 {
			fmt.Fprintf(w, "| %s / %s (%s) | not measured |\n", num, den, metric)
			continue
		}
		fmt.Fprintf(w, "| %s / %s (%s) | %.3f× |\n", num, den, metric, median(a)/median(b))
	}
}

// splitRatio splits NUM=DEN at the "=" that leaves a measured benchmark on
// both sides (names may hold "=", as in "warm=4"); at the first "=" when
// none does.
func splitRatio(spec string, res results) (num, den string, ok bool) {
	for i := range len(spec) {
		if spec[i] == '=' && res["Benchmark"+spec[:i]] != nil && res["Benchmark"+spec[i+1:]] != nil {
			return spec[:i], spec[i+1:], true
		}
	}
	return strings.Cut(spec, "=")
}

// human prints a metric value with a readable unit.
func human(v float64, unit string) string {
	if unit == "ns/op" {
		switch {
		case v >= 1e9:
			return fmt.Sprintf("%.2f s/op", v/1e9)
		case v >= 1e6:
			return fmt.Sprintf("%.2f ms/op", v/1e6)
		case v >= 1e3:
			return fmt.Sprintf("%.2f µs/op", v/1e3)
		}
	}
	return strconv.FormatFloat(v, 'g', 4, 64) + " " + unit
}
