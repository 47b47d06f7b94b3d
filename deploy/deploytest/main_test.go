package deploytest

import (
	"os"
	"path/filepath"
	"testing"
)

func TestMain(m *testing.M) {
	code := m.Run()
	removeWrenchImage()
	for _, d := range tempDirs {
		os.RemoveAll(d)
	}
	stopKubeAPI()
	if builtBin != "" {
		os.RemoveAll(filepath.Dir(builtBin))
	}
	os.Exit(code)
}
