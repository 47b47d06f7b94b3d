//go:build unix && !linux

package workspace

// copyRange copies size bytes from src at off to the current offset of
// dst.
func copyRange(src int, off int64, dst int, size int64) error {
	return copyRangeUser(src, off, dst, size)
}
