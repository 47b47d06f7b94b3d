package agent

import (
	"maps"
	"slices"
	"testing"
)

// TestSamplePromptDataHasEveryKey keeps the data prompts are checked with
// (samplePromptData) in step with the data they are rendered with.
func TestSamplePromptDataHasEveryKey(t *testing.T) {
	s := &runState{a: New(Config{}), r: &Run{}, envInfo: &EnvInfo{}}
	s.tools = newToolbox(s.toolKit())
	run := s.promptData()
	run["Transcript"] = "" // compaction's own key
	want := slices.Sorted(maps.Keys(run))
	got := slices.Sorted(maps.Keys(samplePromptData(true)))
	if !slices.Equal(got, want) {
		t.Errorf("sample keys %v,\nrun keys %v", got, want)
	}
}
