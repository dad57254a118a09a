package join

import (
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/kubewin/kubewin/internal/api/v1alpha1"
	"github.com/kubewin/kubewin/internal/nodecmd"
	"github.com/kubewin/kubewin/internal/nodestatus"
	"github.com/kubewin/kubewin/nodeboot/internal/nodefiles"
	"github.com/kubewin/kubewin/nodeboot/internal/platform"
)

// renderData is what rendering the node's files reads: the network, kubelet-config and
// services phases and the reset render them.
type renderData interface {
	config() *v1alpha1.NodeConfig
	manifest() *v1alpha1.ImageManifest
	paths() nodecmd.Paths
	nodeName() string
	learned() *Learned
	machine() platform.Platform
	// rendered is where the last plan is kept.
	rendered() *renderedPlan
}

// renderedPlan is the last plan rendered and the facts it was rendered from: the phases, the
// boot and every drift check render the node's files and command lines from the same facts,
// and a render marshals the kubelet's and kube-proxy's configurations.
type renderedPlan struct {
	mu    sync.Mutex
	facts nodefiles.Facts
	plan  *nodefiles.Plan
}

// facts are what the network phase learned about the node, and the machine's memory.
func facts(d renderData) (nodefiles.Facts, error) {
	l := d.learned()
	if !l.NodeIP.IsValid() || !l.PodCIDR.IsValid() {
		return nodefiles.Facts{}, fmt.Errorf("the node's address and pod CIDR are not known yet: run the network phase")
	}
	mem, err := d.machine().Memory()
	if err != nil {
		return nodefiles.Facts{}, fmt.Errorf("read the machine's memory: %w", err)
	}
	return nodefiles.Facts{NodeName: d.nodeName(), NodeIP: l.NodeIP, NodeSubnet: l.Subnet, PodCIDR: l.PodCIDR, Memory: mem}, nil
}

// plan renders the node's files and service command lines, or returns the last plan when it
// was rendered from the same facts (the NodeConfig, manifest and paths do not change). The plan
// is shared: its callers only read it.
func plan(d renderData) (*nodefiles.Plan, error) {
	f, err := facts(d)
	if err != nil {
		return nil, err
	}
	r := d.rendered()
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.plan != nil && r.facts == f {
		return r.plan, nil
	}
	p, err := nodefiles.Render(d.config(), d.manifest(), f, d.paths())
	if err != nil {
		return nil, err
	}
	r.facts, r.plan = f, p
	return p, nil
}

// writeFiles writes the plan's CNI files (cni=true) or the others.
func writeFiles(p platform.Platform, paths nodecmd.Paths, plan *nodefiles.Plan, cni bool, code nodestatus.Code) error {
	files := make([]string, 0, len(plan.Files))
	for path := range plan.Files {
		if strings.HasPrefix(path, paths.CNIConfDir+`\`) == cni {
			files = append(files, path)
		}
	}
	slices.Sort(files)
	for _, path := range files {
		if err := p.WriteFile(path, plan.Files[path]); err != nil {
			return nodestatus.Errorf(code, "write %s: %w", path, err)
		}
	}
	return nil
}
