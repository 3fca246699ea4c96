// Package observability tests the planner's alert rules and Grafana
// dashboard: every PromQL expression parses with the Prometheus parser, and
// every metric it names is one `planner run` registers, read from the
// registry itself (hack/metricnames), not from a hand-written list.
package observability
