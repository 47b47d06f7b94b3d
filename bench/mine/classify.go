package mine

import (
	"path"
	"strings"
)

// testDirs are directory names whose files are tests or test data.
var testDirs = map[string]bool{"test": true, "tests": true, "testdata": true, "__tests__": true}

// IsTestPath reports whether a repository path is a test file or test
// data: Go's *_test.go, Python's test_*.py, *_test.py, tests.py and
// conftest.py, and anything under a test, tests, testdata or __tests__ directory.
func IsTestPath(p string) bool {
	base := path.Base(p)
	switch {
	case strings.HasSuffix(base, "_test.go"):
		return true
	case path.Ext(base) == ".py" && (strings.HasPrefix(base, "test_") || strings.HasSuffix(base, "_test.py") || base == "conftest.py" || base == "tests.py"):
		return true
	}
	for _, d := range strings.Split(path.Dir(p), "/") {
		if testDirs[d] {
			return true
		}
	}
	return false
}

// codeExts are the extensions of source code (as opposed to docs, data
// and configuration).
var codeExts = map[string]bool{
	".go": true, ".py": true, ".pyx": true, ".js": true, ".mjs": true, ".ts": true, ".tsx": true, ".jsx": true,
	".rb": true, ".rs": true, ".java": true, ".kt": true, ".scala": true, ".c": true, ".h": true, ".cc": true,
	".cpp": true, ".hpp": true, ".cs": true, ".swift": true, ".php": true, ".sh": true, ".s": true,
}

// IsCodePath reports whether p is source code that is not a test.
func IsCodePath(p string) bool {
	return codeExts[strings.ToLower(path.Ext(p))] && !IsTestPath(p)
}
