// Package deploytest checks Wrench's deployment material: the Helm chart in
// charts/wrench (rendered with a small Helm-compatible renderer, since helm
// itself is not available here), the Compose file, the Prometheus alert
// rules and the Grafana dashboard in deploy/. It has no API: everything is
// in its tests.
//
// The metric names the dashboard and the rules query are checked against
// the metrics package telemetry registers; the flags the chart passes to
// `wrench serve` and `wrench worker` are checked against a freshly built
// binary's flag set; promtool (Debian package prometheus) checks and unit
// tests the rules when it is installed (required when CI=true).
package deploytest
