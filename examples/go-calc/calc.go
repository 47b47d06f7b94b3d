// Package calc does small sums.
package calc

// Add returns a plus b.
func Add(a, b int) int {
	return a - b
}

// Mean returns the average of xs, and 0 for an empty slice.
func Mean(xs []float64) float64 {
	var sum float64
	for _, x := range xs {
		sum += x
	}
	return sum / float64(len(xs))
}
