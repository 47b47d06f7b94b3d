package bench

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// prepareDir creates Dir and its run.json, or checks a resumed one.
func prepareDir(cfg RunConfig) (RunInfo, error) {
	digest := instancesDigest(cfg.Instances)
	p := filepath.Join(cfg.Dir, "run.json")
	data, err := os.ReadFile(p)
	switch {
	case err == nil:
		if !cfg.Resume {
			return RunInfo{}, ErrRunExists
		}
		var info RunInfo
		if err := json.Unmarshal(data, &info); err != nil {
			return RunInfo{}, fmt.Errorf("read %s: %w", p, err)
		}
		if info.Model != cfg.Model || info.Instances != digest {
			return RunInfo{}, fmt.Errorf("cannot resume: %s ran model %q on other instances (sha256 %s); this is model %q on %s",
				cfg.Dir, info.Model, short(info.Instances), cfg.Model, short(digest))
		}
		return info, nil
	case !errors.Is(err, os.ErrNotExist):
		return RunInfo{}, err
	}
	for _, d := range []string{cfg.Dir, filepath.Join(cfg.Dir, "patches"), filepath.Join(cfg.Dir, "oracle")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return RunInfo{}, err
		}
	}
	info := RunInfo{Name: cfg.Name, Model: cfg.Model, Instances: digest, Count: len(cfg.Instances), Created: time.Now().UTC()}
	b, _ := json.MarshalIndent(info, "", "  ")
	return info, writeFileAtomic(p, append(b, '\n'))
}

func short(s string) string {
	if len(s) > 12 {
		return s[:12]
	}
	return s
}

func instancesDigest(ins []Instance) string {
	h := sha256.New()
	enc := json.NewEncoder(h)
	for i := range ins {
		_ = enc.Encode(&ins[i])
	}
	return hex.EncodeToString(h.Sum(nil))
}

// loadResults reads results.jsonl, dropping a torn last line from the
// file itself so that appends continue after the last good line.
func loadResults(dir string) ([]Result, error) {
	p := filepath.Join(dir, "results.jsonl")
	data, err := os.ReadFile(p)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	rs, err := DecodeResults(strings.NewReader(string(data)))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", p, err)
	}
	if good := lastGoodEnd(data); good != len(data) {
		if err := os.Truncate(p, int64(good)); err != nil {
			return nil, err
		}
	}
	return rs, nil
}

// lastGoodEnd is the length of data up to its last complete JSON line.
func lastGoodEnd(data []byte) int {
	end := strings.LastIndexByte(string(data), '\n') + 1
	if end == len(data) {
		return end
	}
	var v json.RawMessage
	if json.Unmarshal(data[end:], &v) == nil {
		return len(data) // a last line without its newline, but whole
	}
	return end
}

// resultWriter appends results and keeps each instance's patch.
type resultWriter struct {
	mu  sync.Mutex
	dir string
	f   *os.File
}

func newResultWriter(dir string) (*resultWriter, error) {
	f, err := os.OpenFile(filepath.Join(dir, "results.jsonl"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, err
	}
	return &resultWriter{dir: dir, f: f}, nil
}

// write stores the patch first, then the result line: a result on disk
// always has its patch.
func (w *resultWriter) write(r Result, patch string) error {
	if err := writeFileAtomic(filepath.Join(w.dir, "patches", safeName(r.InstanceID)+".diff"), []byte(patch)); err != nil {
		return err
	}
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, err := w.f.Write(append(b, '\n')); err != nil {
		return err
	}
	return w.f.Sync()
}

func (w *resultWriter) close() { _ = w.f.Close() }

// Finish writes predictions.jsonl, report.json and report.md from the
// results in dir and returns the report. The files depend only on the
// results, not on the order they finished in.
func Finish(dir, name, model string) (Report, error) {
	rs, err := loadResults(dir)
	if err != nil {
		return Report{}, err
	}
	SortResults(rs)
	preds := make([]Prediction, 0, len(rs))
	for _, r := range rs {
		patch, err := os.ReadFile(filepath.Join(dir, "patches", safeName(r.InstanceID)+".diff"))
		if err != nil {
			return Report{}, fmt.Errorf("patch of %s: %w", r.InstanceID, err)
		}
		preds = append(preds, Prediction{InstanceID: r.InstanceID, ModelNameOrPath: ModelLabel(model), ModelPatch: string(patch)})
	}
	var b strings.Builder
	if err := WriteJSONL(&b, preds); err != nil {
		return Report{}, err
	}
	if err := writeFileAtomic(filepath.Join(dir, "predictions.jsonl"), []byte(b.String())); err != nil {
		return Report{}, err
	}
	rep := NewReport(name, ModelLabel(model), rs)
	js, _ := json.MarshalIndent(rep, "", "  ")
	if err := writeFileAtomic(filepath.Join(dir, "report.json"), append(js, '\n')); err != nil {
		return Report{}, err
	}
	var md strings.Builder
	_ = rep.WriteMarkdown(&md)
	return rep, writeFileAtomic(filepath.Join(dir, "report.md"), []byte(md.String()))
}

// writeFileAtomic writes data to p through a temporary file and a rename.
func writeFileAtomic(p string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(p), "."+filepath.Base(p)+".*")
	if err != nil {
		return err
	}
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return err
	}
	if err := tmp.Close(); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	return os.Rename(tmp.Name(), p)
}
