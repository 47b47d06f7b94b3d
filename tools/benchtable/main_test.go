package main

import (
	"bytes"
	"strings"
	"testing"
)

const sample = `goos: linux
BenchmarkExec/cli_docker_exec-2   	      10	  90000000 ns/op
BenchmarkExec/cli_docker_exec-2   	      10	  80000000 ns/op
BenchmarkExec/cli_docker_exec-2   	      10	 100000000 ns/op
BenchmarkExec/shim-2              	     500	   1000000 ns/op	  200 B/op	 3 allocs/op
BenchmarkExec/shim-2              	     500	   3000000 ns/op	  200 B/op	 3 allocs/op
BenchmarkTurn-2   1000  900 ns/op  0.8 p50-ms
PASS
`

func TestTable(t *testing.T) {
	res, order, err := parse(strings.NewReader(sample))
	if err != nil {
		t.Fatal(err)
	}
	if len(order) != 3 || median(res["BenchmarkExec/cli_docker_exec"]["ns/op"]) != 9e7 {
		t.Fatalf("parsed %v %v", order, res)
	}
	var out bytes.Buffer
	write(&out, res, order, []string{"Exec/shim=Exec/cli_docker_exec", "Turn=Missing"})
	for _, want := range []string{"| Exec/cli_docker_exec | 3 | 90.00 ms/op |", "2.00 ms/op", "0.022×", "not measured", "0.8 p50-ms"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, out.String())
		}
	}
}

// Benchmark names may hold "=": the ratio splits where both sides name a
// measured benchmark.
func TestRatioOfNamesWithEquals(t *testing.T) {
	res, order, err := parse(strings.NewReader("BenchmarkLat/warm=4-2 1 100 ns/op\nBenchmarkLat/warm=0-2 1 400 ns/op\n"))
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	write(&out, res, order, []string{"Lat/warm=4=Lat/warm=0"})
	if !strings.Contains(out.String(), "| Lat/warm=4 / Lat/warm=0 (ns/op) | 0.250× |") {
		t.Errorf("ratio:\n%s", out.String())
	}
}
