package azure

import (
	"context"
	"fmt"
	"reflect"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v6"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v6"
	"github.com/hashicorp/terraform-plugin-log/tflog"
	"golang.org/x/sync/errgroup"
)

// A kind is how resources of one type are read, written and deleted through the SDK: a Get,
// and a create-or-update and a delete polled to their end. B is the resource's request body.
type kind[B any] struct {
	typ  string
	tags func(ctx context.Context, c *Client, group, name string) (map[string]*string, error)
	put  func(ctx context.Context, c *Client, group, name string, body B) error
	del  func(ctx context.Context, c *Client, group, name string) error
}

// newKind makes the kind of an SDK client's Get, BeginCreateOrUpdate and BeginDelete methods.
func newKind[C, B, G, GO, PR, PO, DR, DO any](typ string, client func(*Client) C,
	get func(C, context.Context, string, string, *GO) (G, error),
	put func(C, context.Context, string, string, B, *PO) (*runtime.Poller[PR], error),
	del func(C, context.Context, string, string, *DO) (*runtime.Poller[DR], error)) kind[B] {
	return kind[B]{
		typ: typ,
		tags: func(ctx context.Context, c *Client, group, name string) (map[string]*string, error) {
			r, err := get(client(c), ctx, group, name, nil)
			return tagsOf(r), err
		},
		put: func(ctx context.Context, c *Client, group, name string, body B) error {
			p, err := put(client(c), ctx, group, name, body, nil)
			_, err = wait(ctx, c, p, err)
			return err
		},
		del: func(ctx context.Context, c *Client, group, name string) error {
			p, err := del(client(c), ctx, group, name, nil)
			_, err = wait(ctx, c, p, err)
			return err
		},
	}
}

// tagsOf reads the Tags of an SDK Get response, which embeds the resource.
func tagsOf(response any) map[string]*string {
	tags, _ := reflect.ValueOf(response).FieldByName("Tags").Interface().(map[string]*string)
	return tags
}

func network[C any](f func(*armnetwork.ClientFactory) C) func(*Client) C {
	return func(c *Client) C { return f(c.network) }
}

func compute[C any](f func(*armcompute.ClientFactory) C) func(*Client) C {
	return func(c *Client) C { return f(c.compute) }
}

// The kinds kubewin makes.
var (
	securityGroups = newKind(typeSecurityGroup, network((*armnetwork.ClientFactory).NewSecurityGroupsClient),
		(*armnetwork.SecurityGroupsClient).Get, (*armnetwork.SecurityGroupsClient).BeginCreateOrUpdate,
		(*armnetwork.SecurityGroupsClient).BeginDelete)
	routeTables = newKind(typeRouteTable, network((*armnetwork.ClientFactory).NewRouteTablesClient),
		(*armnetwork.RouteTablesClient).Get, (*armnetwork.RouteTablesClient).BeginCreateOrUpdate,
		(*armnetwork.RouteTablesClient).BeginDelete)
	virtualNetworks = newKind(typeVirtualNetwork, network((*armnetwork.ClientFactory).NewVirtualNetworksClient),
		(*armnetwork.VirtualNetworksClient).Get, (*armnetwork.VirtualNetworksClient).BeginCreateOrUpdate,
		(*armnetwork.VirtualNetworksClient).BeginDelete)
	publicIPs = newKind(typePublicIP, network((*armnetwork.ClientFactory).NewPublicIPAddressesClient),
		(*armnetwork.PublicIPAddressesClient).Get, (*armnetwork.PublicIPAddressesClient).BeginCreateOrUpdate,
		(*armnetwork.PublicIPAddressesClient).BeginDelete)
	natGateways = newKind(typeNatGateway, network((*armnetwork.ClientFactory).NewNatGatewaysClient),
		(*armnetwork.NatGatewaysClient).Get, (*armnetwork.NatGatewaysClient).BeginCreateOrUpdate,
		(*armnetwork.NatGatewaysClient).BeginDelete)
	loadBalancers = newKind(typeLoadBalancer, network((*armnetwork.ClientFactory).NewLoadBalancersClient),
		(*armnetwork.LoadBalancersClient).Get, (*armnetwork.LoadBalancersClient).BeginCreateOrUpdate,
		(*armnetwork.LoadBalancersClient).BeginDelete)
	interfaces = newKind(typeInterface, network((*armnetwork.ClientFactory).NewInterfacesClient),
		(*armnetwork.InterfacesClient).Get, (*armnetwork.InterfacesClient).BeginCreateOrUpdate,
		(*armnetwork.InterfacesClient).BeginDelete)
	virtualMachines = newKind(typeVirtualMachine, compute((*armcompute.ClientFactory).NewVirtualMachinesClient),
		(*armcompute.VirtualMachinesClient).Get, (*armcompute.VirtualMachinesClient).BeginCreateOrUpdate,
		(*armcompute.VirtualMachinesClient).BeginDelete)
	scaleSets = newKind(typeScaleSet, compute((*armcompute.ClientFactory).NewVirtualMachineScaleSetsClient),
		(*armcompute.VirtualMachineScaleSetsClient).Get, (*armcompute.VirtualMachineScaleSetsClient).BeginCreateOrUpdate,
		(*armcompute.VirtualMachineScaleSetsClient).BeginDelete)
)

// An object is one resource of a cluster: its ID, and its kind's calls with its request body.
type object interface {
	ID() resourceID
	tags(ctx context.Context, c *Client) (map[string]*string, error)
	put(ctx context.Context, c *Client) error
	del(ctx context.Context, c *Client) error
}

// spec is a resource of a kind; body builds its request body (only when it is created).
type spec[B any] struct {
	id   resourceID
	kind kind[B]
	body func() (B, error)
}

func (s spec[B]) ID() resourceID { return s.id }

func (s spec[B]) tags(ctx context.Context, c *Client) (map[string]*string, error) {
	return s.kind.tags(ctx, c, s.id.group, s.id.name)
}

// put creates the resource. A write Compute preempted is sent again, and a failure to create
// machines says what to do about it (computeerrors.go), as for a pool's. A machine whose guest did
// not report its provisioning in time (OSProvisioningTimedOut) runs, as for a pool's: its
// bootstrap decides, which the cluster waits for.
func (s spec[B]) put(ctx context.Context, c *Client) error {
	b, err := s.body()
	if err != nil {
		return err
	}
	err = preemptible(ctx, "create "+s.id.String(), func() error { return s.kind.put(ctx, c, s.id.group, s.id.name, b) })
	if provisioningTimedOut(err) {
		tflog.Warn(ctx, "Azure gave up waiting for a machine's provisioning (OSProvisioningTimedOut); it runs, and its bootstrap decides",
			map[string]any{"resource": s.id.String(), "error": err.Error()})
		return nil
	}
	const again = "the next apply makes the machines again"
	switch m := any(b).(type) {
	case armcompute.VirtualMachine: // a control plane, whose count only grows
		err = explainCreate(err, string(deref(m.Properties.HardwareProfile.VMSize)), deref(m.Location), derefAll(m.Zones), 1, "", again)
		err = c.explainLinkedImage(ctx, err, deref(m.Properties.StorageProfile.ImageReference.ID))
	case armcompute.VirtualMachineScaleSet: // the Linux agents
		err = explainCreate(err, deref(m.SKU.Name), deref(m.Location), derefAll(m.Zones), int(deref(m.SKU.Capacity)), "azure.linux_pool.node_count", again)
		err = c.explainLinkedImage(ctx, err, deref(m.Properties.VirtualMachineProfile.StorageProfile.ImageReference.ID))
	}
	return err
}

func (s spec[B]) del(ctx context.Context, c *Client) error {
	return s.kind.del(ctx, c, s.id.group, s.id.name)
}

// newSpec is the cluster's resource of kind k named name.
func newSpec[B any](c *Cluster, k kind[B], name string, body func() (B, error)) object {
	return spec[B]{id: c.id(k.typ, name), kind: k, body: body}
}

// pure makes a body builder of a body that cannot fail.
func pure[B any](b func() B) func() (B, error) { return func() (B, error) { return b(), nil } }

// ensure creates an object unless it exists already, which must then be the cluster's.
func (c *Cluster) ensure(ctx context.Context, o object) error {
	id := o.ID().String()
	tags, err := o.tags(ctx, c.Client)
	if err == nil {
		return c.ours(id, tags)
	}
	if !notFound(err) {
		return fmt.Errorf("read %s: %w", id, err)
	}
	tflog.Info(ctx, "creating", map[string]any{"resource": id})
	if err := o.put(ctx, c.Client); err != nil {
		return fmt.Errorf("create %s: %w", id, err)
	}
	return nil
}

// remove deletes an object of the cluster; one that is gone, or is not the cluster's, is left.
func (c *Cluster) remove(ctx context.Context, o object) error {
	id := o.ID().String()
	tags, err := o.tags(ctx, c.Client)
	if notFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read %s: %w", id, err)
	}
	if notOurs := c.ours(id, tags); notOurs != nil {
		tflog.Warn(ctx, "not deleting a resource the cluster did not create", map[string]any{"resource": id, "reason": notOurs.Error()})
		return nil //nolint:nilerr // a resource that is not the cluster's is left in place, with the warning above
	}
	tflog.Info(ctx, "deleting", map[string]any{"resource": id})
	if err := o.del(ctx, c.Client); err != nil && !notFound(err) {
		return fmt.Errorf("delete %s: %w", id, err)
	}
	return nil
}

// ensureAll creates the objects of each step in order, a step's objects in parallel.
func (c *Cluster) ensureAll(ctx context.Context, steps [][]object) error {
	for _, step := range steps {
		g, gctx := errgroup.WithContext(ctx)
		for _, o := range step {
			g.Go(func() error { return c.ensure(gctx, o) })
		}
		if err := g.Wait(); err != nil {
			return err
		}
	}
	return nil
}

// removeAll deletes the objects of the steps in reverse order, one at a time.
func (c *Cluster) removeAll(ctx context.Context, steps [][]object) error {
	for i := len(steps) - 1; i >= 0; i-- {
		for j := len(steps[i]) - 1; j >= 0; j-- {
			if err := c.remove(ctx, steps[i][j]); err != nil {
				return err
			}
		}
	}
	return nil
}
