// Package importrules holds the test of the project's import rules (see
// importrules_test.go): the domain types, the agent, the edit formats and
// the reaper import no infrastructure, the sandbox vocabulary and the diff
// only the standard library, and the Docker SDK stays in the Docker
// backend. It has no code of its own.
package importrules
