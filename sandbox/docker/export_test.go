package docker

import "github.com/wrenchworks/wrench/sandbox"

// HostMeasurements is how many of sb's disk measurements walked its layer
// on the host instead of asking the engine.
func HostMeasurements(sb sandbox.Sandbox) int64 {
	return sb.(*Sandbox).hostMeasures.Load()
}
