package armtest

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/authorization/armauthorization/v2"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v6"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/msi/armmsi"
	"github.com/google/uuid"
)

// Microsoft.ManagedIdentity user-assigned identities and Microsoft.Authorization role
// assignments on resource groups. The shared ARM JSON schemas (Compute and Network) have none
// for these two providers, so their bodies are decoded strictly by the SDK models alone
// (kind.noSchema).

// API versions of the SDK modules kubewin uses (armmsi v1.3.0, armauthorization/v2 v2.2.0).
const (
	IdentityAPIVersion       = "2024-11-30"
	RoleAssignmentAPIVersion = "2022-04-01"
)

const (
	typeIdentity       = "Microsoft.ManagedIdentity/userAssignedIdentities"
	typeRoleAssignment = "Microsoft.Authorization/roleAssignments"
)

// BuiltInRoles are the built-in role definitions the server knows, by GUID
// (https://learn.microsoft.com/azure/role-based-access-control/built-in-roles).
var BuiltInRoles = map[string]string{
	"acdd72a7-3385-48ef-bd42-f606fba81ae7": "Reader",
	"b24988ac-6180-42a0-ab88-20f7382dd24c": "Contributor",
	"4d97b98b-1d4f-4787-a291-c67834d212e7": "Network Contributor",
	"9980e02c-c2be-4d73-94e8-173b1dc7cf3c": "Virtual Machine Contributor",
	"17d1049b-9a84-46fb-8f53-869881c3d3ab": "Storage Account Contributor",
}

// userIdentity is a user-assigned managed identity: its service principal (client and object
// IDs) is made with it and is what the token endpoint serves and roles are assigned to.
type userIdentity struct {
	id, location        string
	tags                map[string]*string
	clientID, principal string
	created             time.Time
}

// roleAssignment is a role assignment on a resource group.
type roleAssignment struct {
	id, scope string
	props     armauthorization.RoleAssignmentProperties
}

var identityKind = kind{
	typ: typeIdentity, path: groupPath + "Microsoft.ManagedIdentity/userAssignedIdentities/{}", version: IdentityAPIVersion,
	list: true, noSchema: true,
	model: func() json.Unmarshaler { return &armmsi.Identity{} },
	check: func(_ *Server, _ *armRequest, m any) *apiError {
		id := as[*armmsi.Identity](m)
		id.Properties = nil // clientId, principalId and tenantId are read-only
		return checkLocation(id.Location)
	},
	find: func(s *Server, id string) any { return found(s.userIdentities[strings.ToLower(id)]) },
	write: func(s *Server, q *armRequest, m, old any) (*change, *apiError) {
		body := as[*armmsi.Identity](m)
		u := &userIdentity{id: q.resourceID(), location: *body.Location, tags: body.Tags, created: time.Now()}
		status := http.StatusCreated
		if old != nil {
			o := as[*userIdentity](old)
			u.clientID, u.principal, u.created, status = o.clientID, o.principal, o.created, http.StatusOK
		} else {
			u.clientID, u.principal = newUUID(), newUUID()
		}
		s.userIdentities[strings.ToLower(u.id)] = u
		return &change{status: status, view: func() any { return s.identityView(u) }}, nil
	},
	// Deleting an identity leaves the role assignments to it ("Identity not found" in the
	// portal) and the machines that carry it.
	remove: func(s *Server, _ *armRequest, r any) *change {
		u := as[*userIdentity](r)
		delete(s.userIdentities, strings.ToLower(u.id))
		return &change{status: http.StatusOK, view: func() any { return s.identityView(u) }}
	},
	view: func(s *Server, r any, _ string) any { return s.identityView(as[*userIdentity](r)) },
	items: func(s *Server, q *armRequest) []any {
		return topLevelItems(q, s.userIdentities, func(u *userIdentity) any { return s.identityView(u) })
	},
}

func (s *Server) identityView(u *userIdentity) armmsi.Identity {
	return armmsi.Identity{
		ID: to.Ptr(u.id), Name: to.Ptr(lastSegment(u.id)), Type: to.Ptr(typeIdentity), Location: to.Ptr(u.location), Tags: u.tags,
		Properties: &armmsi.UserAssignedIdentityProperties{ClientID: to.Ptr(u.clientID), PrincipalID: to.Ptr(u.principal),
			TenantID: to.Ptr(s.opts.TenantID)},
	}
}

// principal returns the identity whose principal (object) ID is id, nil for none; s.mu is held.
func (s *Server) principal(id string) *userIdentity {
	for _, u := range s.userIdentities {
		if strings.EqualFold(u.principal, id) {
			return u
		}
	}
	return nil
}

var roleAssignmentKind = kind{
	typ: typeRoleAssignment, path: groupPath + "Microsoft.Authorization/roleAssignments/{}", version: RoleAssignmentAPIVersion,
	list: true, noSchema: true,
	model: func() json.Unmarshaler { return &armauthorization.RoleAssignmentCreateParameters{} },
	check: checkRoleAssignment,
	find:  func(s *Server, id string) any { return found(s.roleAssignments[strings.ToLower(id)]) },
	write: writeRoleAssignment,
	remove: func(s *Server, _ *armRequest, r any) *change {
		a := as[*roleAssignment](r)
		delete(s.roleAssignments, strings.ToLower(a.id))
		return &change{status: http.StatusOK, view: func() any { return a.view() }}
	},
	view: func(_ *Server, r any, _ string) any { return as[*roleAssignment](r).view() },
	items: func(s *Server, q *armRequest) []any {
		return topLevelItems(q, s.roleAssignments, func(a *roleAssignment) any { return a.view() })
	},
}

// checkRoleAssignment checks a role assignment's body: its name is a GUID, and it names a
// principal and a built-in role definition of the subscription.
func checkRoleAssignment(s *Server, q *armRequest, m any) *apiError {
	body := as[*armauthorization.RoleAssignmentCreateParameters](m)
	if _, err := uuid.Parse(q.templateName()); err != nil {
		return newError(http.StatusBadRequest, "InvalidRoleAssignmentId",
			"The role assignment ID '%s' is not valid. The role assignment ID must be a GUID.", q.templateName())
	}
	p := body.Properties
	if p == nil || deref(p.PrincipalID) == "" || deref(p.RoleDefinitionID) == "" {
		return newError(http.StatusBadRequest, "InvalidRequestContent", "A role assignment needs properties.principalId and properties.roleDefinitionId.")
	}
	prefix := "/subscriptions/" + q.name(0) + "/providers/Microsoft.Authorization/roleDefinitions/"
	def, ok := strings.CutPrefix(strings.ToLower(*p.RoleDefinitionID), strings.ToLower(prefix))
	if _, known := BuiltInRoles[def]; !ok || !known {
		return newError(http.StatusBadRequest, "RoleDefinitionDoesNotExist", "The specified role definition with ID '%s' does not exist.",
			*p.RoleDefinitionID)
	}
	p.CreatedBy, p.CreatedOn, p.UpdatedBy, p.UpdatedOn, p.Scope = nil, nil, nil, nil, nil // read-only
	return nil
}

// writeRoleAssignment stores a checked role assignment; s.mu is held. ARM refuses an assignment
// to a principal it cannot find — one that does not exist, or one just created that Microsoft
// Entra ID has not replicated yet (PrincipalReplication) unless principalType says it is a
// service principal
// (https://learn.microsoft.com/azure/role-based-access-control/troubleshooting#symptom---assigning-a-role-to-a-new-principal-sometimes-fails,
// https://learn.microsoft.com/azure/role-based-access-control/role-assignments-template#new-service-principal);
// a second assignment of the same role to the same principal at the same scope
// (RoleAssignmentExists, 409); and a change of an assignment's principal or role
// (RoleAssignmentUpdateNotPermitted).
func writeRoleAssignment(s *Server, q *armRequest, m, old any) (*change, *apiError) {
	p := *as[*armauthorization.RoleAssignmentCreateParameters](m).Properties
	u := s.principal(*p.PrincipalID)
	sp := p.PrincipalType != nil && *p.PrincipalType == armauthorization.PrincipalTypeServicePrincipal
	if u == nil || !sp && time.Since(u.created) < s.opts.PrincipalReplication {
		return nil, newError(http.StatusBadRequest, "PrincipalNotFound",
			"Principal %s does not exist in the directory %s. Check that you have the correct principal ID. If you are creating this principal "+
				"and then immediately assigning a role, this error might be related to a replication delay. In this case, set the role "+
				"assignment principalType property to a value, such as ServicePrincipal, User, or Group.", strings.ReplaceAll(*p.PrincipalID, "-", ""),
			s.opts.TenantID)
	}
	a := &roleAssignment{id: q.resourceID(), scope: s.ResourceGroupID(q.group), props: p}
	a.props.Scope = to.Ptr(a.scope)
	status := http.StatusCreated
	if old != nil {
		o := as[*roleAssignment](old)
		if !strings.EqualFold(*o.props.PrincipalID, *p.PrincipalID) || !strings.EqualFold(*o.props.RoleDefinitionID, *p.RoleDefinitionID) {
			return nil, newError(http.StatusBadRequest, "RoleAssignmentUpdateNotPermitted",
				"Tenant ID, application ID, principal ID, and scope are not allowed to be updated.")
		}
		status = http.StatusOK
	}
	for _, o := range s.roleAssignments {
		if !strings.EqualFold(o.id, a.id) && strings.EqualFold(o.scope, a.scope) && strings.EqualFold(*o.props.PrincipalID, *p.PrincipalID) &&
			strings.EqualFold(*o.props.RoleDefinitionID, *p.RoleDefinitionID) {
			return nil, newError(http.StatusConflict, "RoleAssignmentExists",
				"The role assignment already exists. The ID of the existing role assignment is %s.", lastSegment(o.id))
		}
	}
	s.roleAssignments[strings.ToLower(a.id)] = a
	return &change{status: status, view: func() any { return a.view() }}, nil
}

func (a *roleAssignment) view() armauthorization.RoleAssignment {
	p := a.props
	return armauthorization.RoleAssignment{ID: to.Ptr(a.id), Name: to.Ptr(lastSegment(a.id)), Type: to.Ptr(typeRoleAssignment), Properties: &p}
}

// RoleAssignment is a role assignment as a test reads it.
type RoleAssignment struct {
	Scope, PrincipalID, Role string
}

// RoleAssignments lists the role assignments on a resource group, with their roles' names.
func (s *Server) RoleAssignments(group string) []RoleAssignment {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []RoleAssignment
	for _, key := range sortedKeys(s.roleAssignments) {
		a := s.roleAssignments[key]
		if strings.EqualFold(a.scope, s.ResourceGroupID(group)) {
			def := lastSegment(*a.props.RoleDefinitionID)
			out = append(out, RoleAssignment{Scope: a.scope, PrincipalID: *a.props.PrincipalID, Role: BuiltInRoles[strings.ToLower(def)]})
		}
	}
	return out
}

// carriedIdentities checks the user-assigned identities of a VM's or scale set's identity and
// returns their resource IDs in lower case: each must exist, or ARM refuses the machine
// (FailedIdentityOperation, "Resource '<id>' was not found": Azure/azure-policy#1311), and a
// type without UserAssigned takes none ("ResourceIdentity identityIds should not be provided if
// the type is \"SystemAssigned\"": Azure/aad-pod-identity#214). s.mu is held.
func (s *Server) carriedIdentities(owner string, typ *armcompute.ResourceIdentityType,
	ids map[string]*armcompute.UserAssignedIdentitiesValue) ([]string, *apiError) {
	if len(ids) == 0 {
		return nil, nil
	}
	if typ == nil || !strings.Contains(string(*typ), string(armcompute.ResourceIdentityTypeUserAssigned)) {
		return nil, invalidParameter("identity.userAssignedIdentities",
			"ResourceIdentity identityIds should not be provided if the type is %q.", deref((*string)(typ)))
	}
	var out []string
	for id := range ids {
		if s.userIdentities[strings.ToLower(id)] == nil {
			return nil, newError(http.StatusBadRequest, "FailedIdentityOperation", "Identity operation for resource '%s' failed with error "+
				"'Failed to perform resource identity operation. Status: 'BadRequest'. Response: '{\"error\":{\"code\":\"BadRequest\","+
				"\"message\":\"Resource '%s' was not found.\"}}'.'.", owner, id)
		}
		out = append(out, strings.ToLower(id))
	}
	slices.Sort(out)
	return out, nil
}
