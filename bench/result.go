package bench

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"

	"github.com/wrenchworks/wrench/task"
)

// Prediction is one line of predictions.jsonl, the file the SWE-bench
// harness grades: the instance, the model's name and its patch.
type Prediction struct {
	InstanceID      string `json:"instance_id"`
	ModelNameOrPath string `json:"model_name_or_path"`
	ModelPatch      string `json:"model_patch"`
}

// Failure classes of an instance that was not resolved, SWE-bench v5
// style: the infrastructure's failures are kept apart from the model's, so
// a broken environment does not read as a weak model.
const (
	FailureNone  = ""
	FailureModel = string(task.FaultModel) // the agent ran and the tests say no
	FailureInfra = string(task.FaultInfra) // the task or its grading could not run
)

// Result is one line of results.jsonl: how one instance went.
type Result struct {
	InstanceID string `json:"instance_id"`
	TaskID     string `json:"task_id"`
	// Attempt is the task's delivery that produced the result (2 or more
	// when a worker died while running it).
	Attempt  int    `json:"attempt"`
	Model    string `json:"model"`
	Resolved bool   `json:"resolved"`
	// Failure is FailureModel or FailureInfra when not resolved.
	Failure string `json:"failure,omitempty"`
	// Status and Reason are the task's final state and why it ended (the
	// stop reason).
	Status task.State `json:"status"`
	Reason string     `json:"reason,omitempty"`
	// GradeError says why grading could not judge the work.
	GradeError string             `json:"grade_error,omitempty"`
	FailToPass []task.TestOutcome `json:"fail_to_pass,omitempty"`
	PassToPass []task.TestOutcome `json:"pass_to_pass,omitempty"`
	PatchBytes int                `json:"patch_bytes"`
	Turns      int                `json:"turns"`
	Tokens     int64              `json:"tokens"`
	CostUSD    float64            `json:"cost_usd"`
	// Seconds is the task's wall-clock time; Phases splits it.
	Seconds float64 `json:"seconds"`
	Phases  Phases  `json:"phases"`
}

// Phases is where an instance's time went, in seconds.
type Phases struct {
	Queue    float64 `json:"queue"`
	Setup    float64 `json:"setup"` // clone and the environment: sandbox start, setup or snapshot
	Baseline float64 `json:"baseline"`
	Agent    float64 `json:"agent"`
	Verify   float64 `json:"verify"`
	Grade    float64 `json:"grade"`
	// Other is the rest of the task's time: reading its configuration,
	// taking the patch, cleaning up.
	Other float64 `json:"other"`
}

// ResultOf turns a task's final result into the instance's Result.
func ResultOf(instanceID, model string, r task.Result) Result {
	out := Result{
		InstanceID: instanceID, TaskID: r.TaskID, Attempt: r.Attempt, Model: model,
		Status: r.Status, Reason: r.Reason, PatchBytes: len(r.Patch),
		Turns: r.Usage.Turns, Tokens: r.Usage.InputTokens + r.Usage.OutputTokens, CostUSD: r.Usage.CostUSD,
		Seconds: r.Timings.Total.Seconds(),
		Phases: Phases{
			Queue:    r.Timings.QueueWait.Seconds(),
			Setup:    (r.Timings.Clone + r.Timings.SandboxStart + r.Timings.Setup).Seconds(),
			Baseline: r.Timings.Baseline.Seconds(),
			Agent:    r.Timings.Agent.Seconds(),
			Verify:   r.Timings.Verify.Seconds(),
			Grade:    r.Timings.Grade.Seconds(),
		},
	}
	p := out.Phases
	out.Phases.Other = max(0, out.Seconds-(p.Setup+p.Baseline+p.Agent+p.Verify+p.Grade))
	if g := r.Grade; g != nil {
		out.GradeError = g.Error
		out.FailToPass, out.PassToPass = g.FailToPass, g.PassToPass
	}
	resolved, fault := r.Verdict()
	out.Resolved, out.Failure = resolved, string(fault)
	return out
}

// ReadResults reads a results.jsonl. A last line cut short (the process
// was killed while writing it) is dropped; any other bad line is an error.
func ReadResults(file string) ([]Result, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	return DecodeResults(bytes.NewReader(data))
}

// DecodeResults reads results from JSON lines; see ReadResults.
func DecodeResults(r io.Reader) ([]Result, error) {
	var out []Result
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 64<<20)
	var pending error
	for n := 1; sc.Scan(); n++ {
		if pending != nil {
			return nil, pending
		}
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		var res Result
		if err := json.Unmarshal(line, &res); err != nil {
			pending = fmt.Errorf("results line %d: %w", n, err)
			continue
		}
		out = append(out, res)
	}
	return out, sc.Err()
}

// SortResults orders results by instance id, so that reports do not depend
// on the order instances finished in.
func SortResults(rs []Result) {
	sort.Slice(rs, func(i, j int) bool { return rs[i].InstanceID < rs[j].InstanceID })
}
