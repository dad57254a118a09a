// Package cluster is the seam between kubewin_cluster and its backends: the local backend runs
// a cluster's control plane as processes on this machine (package local), the azure backend
// makes an acs-engine-style cluster in Azure (package azure).
package cluster

import (
	"context"
	"fmt"
)

// State is what a backend reports of a cluster.
type State struct {
	// Endpoint is the API server's URL, https://host:port; FQDN the DNS name of a public
	// endpoint, if the backend gives it one.
	Endpoint, FQDN string
	// CACert is the cluster CA certificate (PEM) and CAHash its pin.
	CACert []byte
	CAHash string
	// Version is the Kubernetes release the control plane runs, "" when the backend does not
	// read it.
	Version string
	// KubeconfigPath is a cluster-admin kubeconfig on this machine, "" when there is none.
	KubeconfigPath string
	// Running is whether every control plane (and agent) of the cluster runs.
	Running bool
	// ControlPlanes and Agents count the machines that exist, for backends that make machines.
	ControlPlanes, Agents int
}

// Cluster is a backend's side of a cluster, as its configuration describes it.
type Cluster interface {
	// Create makes the cluster and waits until its control plane answers. The state it returns
	// with an error, if any, records what was made. Local: starts the control plane's processes,
	// seconds. Azure: a few tens of ARM writes (the network, the load balancer, every control
	// plane and the agents' scale set) and minutes of boot.
	Create(ctx context.Context) (*State, error)
	// Observe reads the cluster; nil when it is gone. Local: reads its files and probes its
	// processes. Azure: one read of the load balancer, one per possible control plane and one
	// of the agents' scale set.
	Observe(ctx context.Context) (*State, error)
	// Repair starts or makes again what is missing of the cluster and makes its in-place
	// changes; last is the state recorded by the previous apply. Local: restarts the stopped
	// processes. Azure: one read per control plane, a few writes per control plane made, and
	// one write of the agents' scale set when its capacity changes.
	Repair(ctx context.Context, last *State) (*State, error)
	// Delete removes the cluster and everything it made; a cluster already gone is not an
	// error. Local: stops the processes and removes the cluster's directory. Azure: one delete
	// per resource the cluster made.
	Delete(ctx context.Context) error
}

// StepError is an error of one step of Repair, which the resource reports under the step.
type StepError struct {
	Step Step
	Err  error
}

// Step is a step of Repair.
type Step int

// The steps of Repair.
const (
	StepConnect         Step = iota // reach the cluster's API server
	StepRead                        // read its machines
	StepAddControlPlane             // make control planes
	StepScale                       // scale the agents
	StepCloudProvider               // apply the cloud provider's objects
)

func (e *StepError) Error() string { return fmt.Sprintf("step %d: %v", e.Step, e.Err) }
func (e *StepError) Unwrap() error { return e.Err }
