// Package deploycheck keeps deploy/ honest: its test parses every manifest
// and loads every yidu configuration there with the binary's own
// config.Load (unknown keys fail), checks that every YIDU_* variable set is
// one the binary reads, that each role holds only the secrets it uses, and
// that the workloads run as non-root with probes, metrics and resource
// bounds on the ports their configuration listens on. It lives under cmd
// because only cmd may read the configuration (docs/architecture.md).
package deploycheck
