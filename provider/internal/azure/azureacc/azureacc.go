// Package azureacc is where the azure acceptance suites run. With credentials in the environment,
// as azurerm's acceptance tests take them (TF_ACC=1, ARM_SUBSCRIPTION_ID, ARM_TENANT_ID, a client
// secret, certificate or OIDC, and ARM_TEST_LOCATION), the target is that subscription; without,
// it is the ARM test server. Either way each run makes its own resource groups through ARM,
// tagged with the run and the time, and deletes them when done; Sweep deletes what an
// interrupted run left.
package azureacc

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"sort"
	"sync/atomic"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v6"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/resources/armresources"

	"github.com/kubewin/kubewin/provider/internal/azure"
)

// Environment variables of the real-Azure track besides the provider's ARM_* ones.
const (
	// EnvLocation is the region the suites create resources in, as azurerm's acceptance tests name it.
	EnvLocation = "ARM_TEST_LOCATION"
	// EnvRun names the run in the tags of its resource groups (default: time and random suffix;
	// the workflow sets the CI run's ID).
	EnvRun = "KUBEWIN_ACC_RUN"
	// EnvWindowsImage is the resource ID of a kubewin Windows image (a gallery image version the
	// Packer template published) of the suites' Kubernetes version, for their Windows pool steps
	// on Azure; unset, those steps are skipped.
	EnvWindowsImage = "KUBEWIN_ACC_WINDOWS_IMAGE_ID"
)

// Tags on every resource group a run makes: the sweeper finds groups by TagRun and ages them by
// TagCreated (RFC 3339).
const (
	TagRun     = "kubewin-acc-run"
	TagCreated = "kubewin-acc-created"
)

// GroupPrefix begins the names of the groups a run makes.
const GroupPrefix = "kubewin-acc-"

// Target is a subscription the suites run in.
type Target struct {
	// Real is true for a target the environment named: what the maintainer's credentials reach.
	Real      bool
	Location  string
	Run       string
	Client    *azure.Client
	groups    *armresources.ResourceGroupsClient
	resources *armresources.Client
	network   *armnetwork.ClientFactory
	seq       atomic.Int64
}

// FromEnv returns the target the environment names, or nil when ARM_SUBSCRIPTION_ID is unset:
// then the suites run against the ARM test server. The credential is read as the provider reads
// it, so the provider under test reaches the same subscription with the same environment.
func FromEnv(ctx context.Context) (*Target, error) {
	if azure.Env("subscription_id") == "" {
		return nil, nil
	}
	location := os.Getenv(EnvLocation)
	if location == "" {
		return nil, fmt.Errorf("ARM_SUBSCRIPTION_ID is set, so the azure acceptance tests target Azure: "+
			"set %s to the region to create their resources in (e.g. westeurope)", EnvLocation)
	}
	c, err := azure.ConfigFrom(nil)
	if err != nil {
		return nil, err
	}
	t, err := New(ctx, c, location, os.Getenv(EnvRun))
	if t != nil {
		t.Real = true
	}
	return t, err
}

// New connects to a subscription; an empty run gets a name from the time and a random suffix.
func New(ctx context.Context, c azure.Config, location, run string) (*Target, error) {
	if run == "" {
		b := make([]byte, 3)
		if _, err := rand.Read(b); err != nil {
			return nil, err
		}
		run = time.Now().UTC().Format("20060102t1504") + "-" + hex.EncodeToString(b)
	}
	client, err := azure.New(ctx, c)
	if err != nil {
		return nil, err
	}
	cred, opts := client.ARM()
	groups, err := armresources.NewResourceGroupsClient(c.SubscriptionID, cred, opts)
	if err != nil {
		return nil, err
	}
	resources, err := armresources.NewClient(c.SubscriptionID, cred, opts)
	if err != nil {
		return nil, err
	}
	network, err := armnetwork.NewClientFactory(c.SubscriptionID, cred, opts)
	if err != nil {
		return nil, err
	}
	return &Target{Location: location, Run: run, Client: client, groups: groups, resources: resources, network: network}, nil
}

// NewGroup creates a resource group for one test, named after the run and tagged with it and the
// time. Delete it with DeleteGroup.
func (t *Target) NewGroup(ctx context.Context) (string, error) {
	name := fmt.Sprintf("%s%s-%d", GroupPrefix, t.Run, t.seq.Add(1))
	_, err := t.groups.CreateOrUpdate(ctx, name, armresources.ResourceGroup{
		Location: to.Ptr(t.Location),
		Tags:     map[string]*string{TagRun: to.Ptr(t.Run), TagCreated: to.Ptr(time.Now().UTC().Format(time.RFC3339))},
	}, nil)
	if err != nil {
		return "", fmt.Errorf("create resource group %s: %w", name, err)
	}
	return name, nil
}

// DeleteGroup deletes a resource group and everything in it, waiting for the end.
func (t *Target) DeleteGroup(ctx context.Context, name string) error {
	return deleteGroup(ctx, t.groups, name)
}

func deleteGroup(ctx context.Context, groups *armresources.ResourceGroupsClient, name string) error {
	p, err := groups.BeginDelete(ctx, name, nil)
	if err == nil {
		_, err = p.PollUntilDone(ctx, &runtime.PollUntilDoneOptions{Frequency: 5 * time.Second})
	}
	if err != nil {
		return fmt.Errorf("delete resource group %s: %w", name, err)
	}
	return nil
}

// Resources lists the IDs of a resource group's top-level resources, sorted (ARM's Resources -
// List By Resource Group): what a test checks a destroy left behind.
func (t *Target) Resources(ctx context.Context, group string) ([]string, error) {
	var ids []string
	pager := t.resources.NewListByResourceGroupPager(group, nil)
	for pager.More() {
		page, err := pager.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("list the resources of resource group %s: %w", group, err)
		}
		for _, r := range page.Value {
			if r.ID != nil {
				ids = append(ids, *r.ID)
			}
		}
	}
	sort.Strings(ids)
	return ids, nil
}

// Network makes a virtual network (10.240.0.0/16) with a subnet "nodes" (10.240.0.0/24) and a
// route table "pods" associated with it in a group, and returns the subnet's and the table's IDs.
func (t *Target) Network(ctx context.Context, group string) (subnetID, routeTableID string, err error) {
	tp, err := t.network.NewRouteTablesClient().BeginCreateOrUpdate(ctx, group, "pods", armnetwork.RouteTable{Location: to.Ptr(t.Location)}, nil)
	if err != nil {
		return "", "", err
	}
	table, err := tp.PollUntilDone(ctx, nil)
	if err != nil {
		return "", "", err
	}
	vp, err := t.network.NewVirtualNetworksClient().BeginCreateOrUpdate(ctx, group, "vnet", armnetwork.VirtualNetwork{
		Location: to.Ptr(t.Location),
		Properties: &armnetwork.VirtualNetworkPropertiesFormat{
			AddressSpace: &armnetwork.AddressSpace{AddressPrefixes: []*string{to.Ptr("10.240.0.0/16")}},
			Subnets: []*armnetwork.Subnet{{Name: to.Ptr("nodes"), Properties: &armnetwork.SubnetPropertiesFormat{
				AddressPrefix: to.Ptr("10.240.0.0/24"), RouteTable: &armnetwork.RouteTable{ID: table.ID},
			}}},
		},
	}, nil)
	if err != nil {
		return "", "", err
	}
	vnet, err := vp.PollUntilDone(ctx, nil)
	if err != nil {
		return "", "", err
	}
	return *vnet.ID + "/subnets/nodes", *table.ID, nil
}

// Sweep deletes the resource groups tagged by a run whose creation tag is older than olderThan
// at now, and returns their names. Groups without the tags are never touched; a group whose
// creation tag does not parse is left and reported.
func Sweep(ctx context.Context, client *azure.Client, olderThan time.Duration, now time.Time) ([]string, error) {
	cred, opts := client.ARM()
	groups, err := armresources.NewResourceGroupsClient(client.SubscriptionID, cred, opts)
	if err != nil {
		return nil, err
	}
	var stale []string
	var errs []error
	pager := groups.NewListPager(&armresources.ResourceGroupsClientListOptions{Filter: to.Ptr("tagName eq '" + TagRun + "'")})
	for pager.More() {
		page, err := pager.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("list the resource groups tagged %s: %w", TagRun, err)
		}
		for _, g := range page.Value {
			if g.Name == nil || g.Tags[TagRun] == nil {
				continue
			}
			created, ok := g.Tags[TagCreated]
			if !ok || created == nil {
				errs = append(errs, fmt.Errorf("resource group %s has %s but no %s tag: left alone", *g.Name, TagRun, TagCreated))
				continue
			}
			at, err := time.Parse(time.RFC3339, *created)
			if err != nil {
				errs = append(errs, fmt.Errorf("resource group %s: tag %s = %q is not an RFC 3339 time: left alone", *g.Name, TagCreated, *created))
				continue
			}
			if now.Sub(at) > olderThan {
				stale = append(stale, *g.Name)
			}
		}
	}
	var deleted []string
	for _, name := range stale {
		if err := deleteGroup(ctx, groups, name); err != nil {
			errs = append(errs, err)
			continue
		}
		deleted = append(deleted, name)
	}
	return deleted, errors.Join(errs...)
}
