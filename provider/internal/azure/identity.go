package azure

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/arm"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/authorization/armauthorization/v2"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/msi/armmsi"
	"github.com/google/uuid"
)

// The cloud provider's identity: a user-assigned managed identity the control planes carry
// (cloud-controller-manager authenticates as it through the instance metadata service, with
// useManagedIdentityExtension and its client ID in the cloud configuration: no secret on disk),
// with the built-in roles that hold the permissions cloud-provider-azure lists for what it does
// (https://kubernetes-sigs.github.io/cloud-provider-azure/topics/azure-permissions/), on the
// cluster's resource group, where the load balancer, its public IPs, the security group, the
// route table, the machines and their network interfaces are:
//
//   - Network Contributor: loadBalancers, publicIPAddresses, networkSecurityGroups, routeTables
//     and their routes, networkInterfaces, virtualNetworks/subnets (read, write, delete);
//   - Virtual Machine Contributor: virtualMachines and virtualMachineScaleSets (and their
//     instances) read and write, to read zones and sizes and put machines in the load balancer's
//     backend pool.
//
// Role IDs: https://learn.microsoft.com/azure/role-based-access-control/built-in-roles.

const (
	typeIdentity       = "Microsoft.ManagedIdentity/userAssignedIdentities"
	typeRoleAssignment = "Microsoft.Authorization/roleAssignments"
)

// A role is a built-in role the identity is given on the cluster's resource group.
type role struct {
	Name, DefinitionID string
}

// CloudProviderRoles are the roles of the cloud provider's identity. Virtual Machine
// Contributor also holds what the Azure Disk CSI driver does with it: disks read, write and
// delete, and the machines' writes that attach and detach them (the driver's list in its
// docs/driver-parameters.md, "required permissions for CSI driver controller"); not snapshots,
// which kubewin's clusters do not enable.
var CloudProviderRoles = []role{
	{Name: "Network Contributor", DefinitionID: "4d97b98b-1d4f-4787-a291-c67834d212e7"},
	{Name: "Virtual Machine Contributor", DefinitionID: "9980e02c-c2be-4d73-94e8-173b1dc7cf3c"},
}

// StorageAccountContributor is the identity's role with the Azure File CSI driver, which makes
// storage accounts and reads their keys (Microsoft.Storage/storageAccounts/write, which neither
// role above holds: the driver's docs/driver-parameters.md asks for this role).
var StorageAccountContributor = role{Name: "Storage Account Contributor", DefinitionID: "17d1049b-9a84-46fb-8f53-869881c3d3ab"}

// identityRoles are the roles the cluster's identity has: the cloud provider's, and with the
// Azure File CSI driver StorageAccountContributor.
func (c *Cluster) identityRoles() []role {
	if c.Spec.Storage != nil && c.Spec.Storage.AzureFile {
		return append(slices.Clone(CloudProviderRoles), StorageAccountContributor)
	}
	return CloudProviderRoles
}

// roleAssignmentDescription marks kubewin's role assignments, which have no tags: its cluster
// name follows.
const roleAssignmentDescription = "kubewin cloud provider identity of cluster "

var (
	identities = newSyncKind(typeIdentity, func(c *Client) *armmsi.UserAssignedIdentitiesClient { return c.msi.NewUserAssignedIdentitiesClient() },
		func(_ *Client, group string) string { return group },
		(*armmsi.UserAssignedIdentitiesClient).Get, (*armmsi.UserAssignedIdentitiesClient).CreateOrUpdate,
		(*armmsi.UserAssignedIdentitiesClient).Delete,
		func(r armmsi.UserAssignedIdentitiesClientGetResponse) map[string]*string { return r.Tags })
	// Role assignments are addressed by scope: the resource group's.
	roleAssignments = newSyncKind(typeRoleAssignment,
		func(c *Client) *armauthorization.RoleAssignmentsClient {
			return c.authorization.NewRoleAssignmentsClient()
		},
		func(c *Client, group string) string {
			return "/subscriptions/" + c.SubscriptionID + "/resourceGroups/" + group
		},
		(*armauthorization.RoleAssignmentsClient).Get, createRoleAssignment, (*armauthorization.RoleAssignmentsClient).Delete,
		func(r armauthorization.RoleAssignmentsClientGetResponse) map[string]*string {
			d := ""
			if r.Properties != nil {
				d = deref(r.Properties.Description)
			}
			if cluster, ok := strings.CutPrefix(d, roleAssignmentDescription); ok {
				return map[string]*string{TagCluster: to.Ptr(cluster)}
			}
			return nil
		})
)

// createRoleAssignment creates a role assignment; one of the same role to the same principal at
// the same scope under another name (someone gave the identity the role already) is the role
// given: ARM refuses a second one with 409 RoleAssignmentExists
// (https://learn.microsoft.com/azure/role-based-access-control/troubleshooting#symptom---role-assignment-already-exists).
// Removing kubewin's assignment by its name leaves that one alone.
//
//nolint:revive // context-as-argument: the shape of the client's method expression, which newSyncKind takes.
func createRoleAssignment(c *armauthorization.RoleAssignmentsClient, ctx context.Context, scope, name string,
	body armauthorization.RoleAssignmentCreateParameters, o *armauthorization.RoleAssignmentsClientCreateOptions) (
	armauthorization.RoleAssignmentsClientCreateResponse, error) {
	r, err := c.Create(ctx, scope, name, body, o)
	if re := (*azcore.ResponseError)(nil); errors.As(err, &re) && re.ErrorCode == "RoleAssignmentExists" {
		return r, nil
	}
	return r, err
}

// newSyncKind makes the kind of an SDK client whose create and delete answer at once (no
// long-running operation): at turns a resource group into the first argument of its methods
// (the group, or a scope), and tags reads a Get response's tags.
func newSyncKind[C, B, G, GO, PR, PO, DR, DO any](typ string, client func(*Client) C, at func(*Client, string) string,
	get func(C, context.Context, string, string, *GO) (G, error),
	put func(C, context.Context, string, string, B, *PO) (PR, error),
	del func(C, context.Context, string, string, *DO) (DR, error),
	tags func(G) map[string]*string) kind[B] {
	return kind[B]{
		typ: typ,
		tags: func(ctx context.Context, c *Client, group, name string) (map[string]*string, error) {
			r, err := get(client(c), ctx, at(c, group), name, nil)
			return tags(r), err
		},
		put: func(ctx context.Context, c *Client, group, name string, body B) error {
			_, err := put(client(c), ctx, at(c, group), name, body, nil)
			return err
		},
		del: func(ctx context.Context, c *Client, group, name string) error {
			_, err := del(client(c), ctx, at(c, group), name, nil)
			return err
		},
	}
}

func (c *Cluster) identityName() string { return c.Spec.Name + "-cloud-provider" }

// IdentityID is the cloud provider's user-assigned identity.
func (c *Cluster) IdentityID() string { return c.id(typeIdentity, c.identityName()).String() }

// identityBody is the cloud provider's identity.
func (c *Cluster) identityBody() armmsi.Identity {
	return armmsi.Identity{Location: to.Ptr(c.Spec.Location), Tags: c.tags()}
}

// roleAssignmentName is the name of the identity's assignment of r: a GUID derived from the
// identity, the role and the scope, so that the same assignment has the same name every time.
func (c *Cluster) roleAssignmentName(r role) string {
	return uuid.NewSHA1(uuid.NameSpaceURL, []byte(c.IdentityID()+"|"+r.DefinitionID)).String()
}

// roleAssignmentBody assigns r on the cluster's resource group to the identity whose principal
// (object) ID is principalID. principalType ServicePrincipal lets ARM assign a role to an
// identity just created before Microsoft Entra ID has replicated it
// (https://learn.microsoft.com/azure/role-based-access-control/role-assignments-template#new-service-principal).
func (c *Cluster) roleAssignmentBody(r role, principalID string) armauthorization.RoleAssignmentCreateParameters {
	return armauthorization.RoleAssignmentCreateParameters{Properties: &armauthorization.RoleAssignmentProperties{
		PrincipalID:      to.Ptr(principalID),
		PrincipalType:    to.Ptr(armauthorization.PrincipalTypeServicePrincipal),
		RoleDefinitionID: to.Ptr("/subscriptions/" + c.Client.SubscriptionID + "/providers/Microsoft.Authorization/roleDefinitions/" + r.DefinitionID),
		Description:      to.Ptr(roleAssignmentDescription + c.Spec.Name),
	}}
}

// identity is the cloud provider's identity and its assignments of roles, as steps: the
// identity, then its assignments (whose bodies read the identity's principal ID once it exists).
func (c *Cluster) identity(ctx context.Context, roles []role) [][]object {
	assignments := make([]object, 0, len(roles))
	for _, r := range roles {
		assignments = append(assignments, c.roleAssignment(ctx, r))
	}
	return [][]object{{newSpec(c, identities, c.identityName(), pure(c.identityBody))}, assignments}
}

// roleAssignment is the identity's assignment of r.
func (c *Cluster) roleAssignment(ctx context.Context, r role) object {
	return newSpec(c, roleAssignments, c.roleAssignmentName(r), func() (armauthorization.RoleAssignmentCreateParameters, error) {
		id, err := c.readIdentity(ctx)
		if err != nil {
			return armauthorization.RoleAssignmentCreateParameters{}, err
		}
		return c.roleAssignmentBody(r, id.PrincipalID), nil
	})
}

// ensureIdentityRoles gives the identity the roles it needs now and takes away
// StorageAccountContributor when the Azure File CSI driver is off: an update that turns the
// driver on or off changes it.
func (c *Cluster) ensureIdentityRoles(ctx context.Context) error {
	if err := c.ensureAll(ctx, c.identity(ctx, c.identityRoles())); err != nil {
		return err
	}
	if slices.Contains(c.identityRoles(), StorageAccountContributor) {
		return nil
	}
	return c.remove(ctx, c.roleAssignment(ctx, StorageAccountContributor))
}

// IdentityIDs are a user-assigned identity's client ID (which a client names to get its tokens),
// principal (object) ID (which roles are assigned to) and Microsoft Entra tenant.
type IdentityIDs struct{ ClientID, PrincipalID, TenantID string }

// readIdentity reads the cloud provider's identity's IDs.
func (c *Cluster) readIdentity(ctx context.Context) (IdentityIDs, error) {
	return c.Client.UserAssignedIdentity(ctx, c.IdentityID())
}

// UserAssignedIdentity reads a user-assigned managed identity's IDs, in any subscription the
// client's credential reaches.
func (c *Client) UserAssignedIdentity(ctx context.Context, id string) (IdentityIDs, error) {
	r, err := arm.ParseResourceID(id)
	if err != nil || !strings.EqualFold(r.ResourceType.String(), typeIdentity) {
		return IdentityIDs{}, fmt.Errorf("%q is not a user-assigned identity's resource ID "+
			"(/subscriptions/<id>/resourceGroups/<group>/providers/Microsoft.ManagedIdentity/userAssignedIdentities/<name>)", id)
	}
	f := c.msi
	if !strings.EqualFold(r.SubscriptionID, c.SubscriptionID) {
		if f, err = armmsi.NewClientFactory(r.SubscriptionID, c.cred, c.armOptions); err != nil {
			return IdentityIDs{}, err
		}
	}
	resp, err := f.NewUserAssignedIdentitiesClient().Get(ctx, r.ResourceGroupName, r.Name, nil)
	if err != nil {
		return IdentityIDs{}, fmt.Errorf("read %s: %w", id, err)
	}
	p := resp.Properties
	if p == nil || deref(p.ClientID) == "" || deref(p.PrincipalID) == "" || deref(p.TenantID) == "" {
		return IdentityIDs{}, fmt.Errorf("%s has no client ID, principal ID and tenant", id)
	}
	return IdentityIDs{ClientID: *p.ClientID, PrincipalID: *p.PrincipalID, TenantID: *p.TenantID}, nil
}
