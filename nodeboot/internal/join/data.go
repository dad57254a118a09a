package join

import (
	"io"
	"time"

	"github.com/kubewin/kubewin/internal/api/v1alpha1"
	"github.com/kubewin/kubewin/internal/nodecmd"
	"github.com/kubewin/kubewin/nodeboot/internal/platform"
)

// The phases read the joining node through interfaces of what each uses, declared next to the
// phase (preflightData, discoveryData, tlsBootstrapData, registerData, networkData,
// kubeletConfigData, servicesData, routesData; renderData for the rendered files). Node
// implements them with the accessors below, its credential files and clients
// (credentials.go).

func (n *Node) config() *v1alpha1.NodeConfig      { return n.Config }
func (n *Node) manifest() *v1alpha1.ImageManifest { return n.Manifest }
func (n *Node) machine() platform.Platform        { return n.Platform }
func (n *Node) paths() nodecmd.Paths              { return n.Paths }
func (n *Node) nodeName() string                  { return n.Name }
func (n *Node) timeouts() Timeouts                { return n.Timeouts }
func (n *Node) clock() func() time.Time           { return n.Clock }
func (n *Node) out() io.Writer                    { return n.Out }

// learned is what the phases learned so far, recorded in the state file with their outcomes.
func (n *Node) learned() *Learned { return &n.state.Data }

func (n *Node) rendered() *renderedPlan { return &n.plan }
