// Package deploy holds yidu's deployment files: the Dockerfile, the Compose
// stack (compose.yaml with yidu.compose.yaml) and the Kubernetes manifests
// under k8s/. It has no code; its test keeps the files honest: every
// manifest parses, every yidu configuration they carry loads with the
// binary's own config.Load (unknown keys fail), every YIDU_* variable they
// set is one the binary reads, each role holds only the secrets it uses,
// and the workloads run as non-root with probes, metrics and resource
// bounds on the ports their configuration listens on.
package deploy
