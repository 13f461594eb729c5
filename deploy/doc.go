// Package deploy holds yidu's deployment files: the Dockerfile, the Compose
// stack (compose.yaml with yidu.compose.yaml) and the Kubernetes manifests
// under k8s/. It has no code; cmd/internal/deploycheck's test keeps the
// files honest.
package deploy
