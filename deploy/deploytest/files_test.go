package deploytest

import (
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// TestEveryFileParses parses every YAML and JSON file under charts/ and
// deploy/. Chart templates are not plain YAML: TestChartRenders renders
// them and parses the output instead.
func TestEveryFileParses(t *testing.T) {
	root := repoRoot(t)
	n := 0
	for _, dir := range []string{"charts", "deploy"} {
		err := filepath.WalkDir(filepath.Join(root, dir), func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(root, p)
			if d.IsDir() {
				if d.Name() == "templates" || d.Name() == "render" {
					return filepath.SkipDir // templates; golden renders (checked by TestChartGolden)
				}
				return nil
			}
			raw, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			switch {
			case strings.HasSuffix(p, ".yaml"), strings.HasSuffix(p, ".yml"):
				n++
				dec := yaml.NewDecoder(strings.NewReader(string(raw)))
				for {
					var v any
					err := dec.Decode(&v)
					if errors.Is(err, io.EOF) {
						break
					}
					if err != nil {
						t.Errorf("%s: %v", rel, err)
						break
					}
				}
			case strings.HasSuffix(p, ".json"):
				n++
				if !json.Valid(raw) {
					t.Errorf("%s is not valid JSON", rel)
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if n < 10 {
		t.Errorf("only %d YAML/JSON files found under charts/ and deploy/", n)
	}
}
