//go:build tools

// Package kube pins the commands built by `make testenv`, and the Windows node binaries
// `make demo`'s release mirror serves (kubelet, kube-proxy, kube-log-runner, kubeadm).
package kube

import (
	_ "go.etcd.io/etcd/server/v3"
	_ "k8s.io/component-base/logs/kube-log-runner"
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-proxy"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubeadm"
	_ "k8s.io/kubernetes/cmd/kubectl"
	_ "k8s.io/kubernetes/cmd/kubelet"
)
