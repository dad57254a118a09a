package armtest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strings"
)

// The resource store: one PUT, PATCH, GET, DELETE and list path for every resource type the
// server keeps, driven by the type's kind (its route, SDK model and rules). A request goes
//
//	PUT:    decode (schemas, SDK model) → check → lock → parent exists → not busy → write → answer
//	PATCH:  decode (update model) → lock → parent exists → exists → merge → check → not busy → write → answer
//	GET:    $expand → lock → parent exists → exists → view
//	DELETE: lock → parent exists → exists (else 204) → not in use → not busy → remove → answer
//	list:   lock → parent exists → items → page
//
// and the answer is a long-running operation (lro.go) unless the write says otherwise.

// kind is a resource type of the store and its rules. Stored resources are the types' own
// structs (*scaleSet, *virtualNetwork, ...), passed as any; find returns a nil interface for none.
type kind struct {
	typ     string // resource type, e.g. Microsoft.Network/routeTables
	path    string // route of one resource, "{}" standing for names
	version string // the api-version served
	parent  *kind  // the kind of the resource this one lives in; nil: a resource group
	list    bool   // the collection route (path without its last name) lists the kind
	expand  []string
	// noun names the kind in the PATCH merge error, e.g. "a scale set".
	noun string
	// noSchema: the shared ARM JSON schemas have none for the kind's provider; its bodies are
	// decoded strictly by the SDK model alone.
	noSchema bool

	// model returns a new SDK model for a PUT body; nil: the kind is read-only.
	model func() json.Unmarshaler
	// patch returns a new SDK update model for a PATCH body; nil: PATCH is not allowed.
	patch func() json.Unmarshaler
	// current returns the stored model of r, into which a PATCH body is merged.
	current func(r any) any
	// check applies the rules that read the body alone; it may complete the model. For PUT it runs
	// before s.mu is taken, for PATCH on the merged model with s.mu held. Nil: none.
	check func(s *Server, q *armRequest, m any) *apiError
	// find returns the stored resource with this ID, nil when there is none; s.mu is held.
	find func(s *Server, id string) any
	// write applies the rules that read the store and stores m (old is nil on create); s.mu is held.
	write func(s *Server, q *armRequest, m any, old any) (*change, *apiError)
	// inUse refuses the deletion of r while other resources use it (nil: never); s.mu is held.
	inUse func(s *Server, q *armRequest, r any) *apiError
	// remove starts the deletion of r; s.mu is held. Nil: DELETE is not allowed.
	remove func(s *Server, q *armRequest, r any) *change
	// view is r as GET returns it, with the $expand value; s.mu is held.
	view func(s *Server, r any, expand string) any
	// items are the resources a list request returns, in order; s.mu is held.
	items func(s *Server, q *armRequest) []any
}

// change is a write the store answers: with an operation that commits it (commit non-nil), or at
// once (commit nil: the write is already applied).
type change struct {
	status int        // of a PUT or PATCH answer, or of a DELETE applied at once; a DELETE operation answers 202
	view   func() any // the answer's body, nil for none (DELETE)
	commit func(failure *apiError) (after func())
}

// found returns r as a stored resource, or a nil interface when r is nil.
func found[T any](r *T) any {
	if r == nil {
		return nil
	}
	return r
}

// parentMissing answers a request below a parent resource that does not exist; s.mu is held.
// A write gets ParentResourceNotFound, a read or delete the parent's ResourceNotFound.
func (s *Server) parentMissing(q *armRequest, write bool) *apiError {
	k := q.route.kind
	if k.parent == nil {
		return nil
	}
	pid := q.id(len(split(k.parent.path)))
	if k.parent.find(s, pid) != nil {
		return nil
	}
	if write {
		return errParentNotFound(k.typ, pid)
	}
	return errResourceNotFound(k.parent.typ, q.name(2), q.group)
}

func (s *Server) notFound(q *armRequest) *apiError {
	return errResourceNotFound(q.route.kind.typ, q.templateName(), q.group)
}

func (s *Server) putResource(w http.ResponseWriter, q *armRequest) *apiError {
	k := q.route.kind
	m := k.model()
	if e := s.decodeBody(q, m); e != nil {
		return e
	}
	if k.check != nil {
		if e := k.check(s, q, m); e != nil {
			return e
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if e := s.parentMissing(q, true); e != nil {
		return e
	}
	return s.store(w, q, m, k.find(s, q.resourceID()))
}

func (s *Server) patchResource(w http.ResponseWriter, q *armRequest) *apiError {
	k := q.route.kind
	if e := s.decodeBody(q, k.patch()); e != nil {
		return e
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if e := s.parentMissing(q, true); e != nil {
		return e
	}
	old := k.find(s, q.resourceID())
	if old == nil {
		return s.notFound(q)
	}
	var doc, p any
	current, err := json.Marshal(k.current(old))
	if err != nil || json.Unmarshal(current, &doc) != nil || json.Unmarshal(q.body, &p) != nil {
		return newError(http.StatusInternalServerError, "InternalServerError", "merging the PATCH body: %v", err)
	}
	// "The behavior for a PATCH of the tags property is to replace all tags with the provided tag keys
	// and values" (Azure/azure-resource-manager-rpc v1.0/resource-api-reference.md, PATCH Resource):
	// tags are not merged key by key.
	if d, ok := doc.(map[string]any); ok {
		if pm, ok := p.(map[string]any); ok && pm["tags"] != nil {
			delete(d, "tags")
		}
	}
	merged, err := json.Marshal(patchIdentity(p, mergePatch(doc, p)))
	if err != nil {
		return newError(http.StatusInternalServerError, "InternalServerError", "merging the PATCH body: %v", err)
	}
	m := k.model()
	if err := json.Unmarshal(merged, m); err != nil {
		return newError(http.StatusBadRequest, "InvalidRequestContent", "The PATCH body does not merge into %s: %v", k.noun, err)
	}
	if k.check != nil {
		if e := k.check(s, q, m); e != nil {
			return e
		}
	}
	return s.store(w, q, m, old)
}

// patchIdentity applies a PATCH's identity type as Compute does, on the merged document: a type
// without UserAssigned drops the user-assigned identities the resource had, and None drops the
// identity ("The type 'None' will remove any identities from the virtual machine scale set",
// VirtualMachineScaleSetIdentity.type and VirtualMachineIdentity.type in the Compute REST API's
// specification; removing the user-assigned identities of a machine with both kinds by sending
// type SystemAssigned: https://learn.microsoft.com/entra/identity/managed-identities-azure-resources/how-to-configure-managed-identities-scale-sets).
// A JSON merge patch alone would keep them beside the new type.
func patchIdentity(patch, merged any) any {
	typ, ok := fieldAt(patch, "identity", "type").(string)
	m, _ := merged.(map[string]any)
	if !ok || m == nil {
		return merged
	}
	identity, _ := m["identity"].(map[string]any)
	switch {
	case identity == nil:
	case strings.EqualFold(typ, "None"):
		delete(m, "identity")
	case !strings.Contains(typ, "UserAssigned"):
		delete(identity, "userAssignedIdentities")
	}
	return merged
}

// fieldAt is the value at a path of JSON objects, nil where there is none.
func fieldAt(v any, path ...string) any {
	for _, k := range path {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[k]
	}
	return v
}

// store writes a checked model unless an operation is under way; s.mu is held.
func (s *Server) store(w http.ResponseWriter, q *armRequest, m, old any) *apiError {
	id := q.resourceID()
	if op := s.busy(id); op != nil {
		return s.conflict(op, id)
	}
	c, e := q.route.kind.write(s, q, m, old)
	if e != nil {
		return e
	}
	s.answer(w, q, id, c)
	return nil
}

// answer answers a write: at once, or with the operation that commits it; s.mu is held.
func (s *Server) answer(w http.ResponseWriter, q *armRequest, id string, c *change) {
	if c.commit == nil {
		writeJSON(w, c.status, c.view())
		return
	}
	op := s.startOperation(q, id, c.commit)
	var body any
	if c.view != nil {
		body = c.view()
	}
	s.writeStarted(w, op, c.status, body)
}

func (s *Server) getResource(w http.ResponseWriter, q *armRequest) *apiError {
	k := q.route.kind
	var exp string
	if len(k.expand) > 0 {
		var e *apiError
		if exp, e = expand(q, k.expand...); e != nil {
			return e
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if e := s.parentMissing(q, false); e != nil {
		return e
	}
	r := k.find(s, q.resourceID())
	if r == nil {
		return s.notFound(q)
	}
	writeJSON(w, http.StatusOK, k.view(s, r, exp))
	return nil
}

func (s *Server) deleteResource(w http.ResponseWriter, q *armRequest) *apiError {
	k := q.route.kind
	id := q.resourceID()
	s.mu.Lock()
	defer s.mu.Unlock()
	if e := s.parentMissing(q, false); e != nil {
		return e
	}
	r := k.find(s, id)
	if r == nil {
		w.WriteHeader(http.StatusNoContent)
		return nil
	}
	if k.inUse != nil {
		if e := k.inUse(s, q, r); e != nil {
			return e
		}
	}
	if op := s.busy(id); op != nil {
		return s.conflict(op, id)
	}
	c := k.remove(s, q, r)
	if c.commit != nil {
		c.status = http.StatusAccepted
	}
	s.answer(w, q, id, c)
	return nil
}

func (s *Server) listResources(w http.ResponseWriter, q *armRequest) *apiError {
	k := q.route.kind
	s.mu.Lock()
	defer s.mu.Unlock()
	if e := s.parentMissing(q, false); e != nil {
		return e
	}
	items := k.items(s, q)
	start, end, next, e := s.page(q, len(items))
	if e != nil {
		return e
	}
	writeJSON(w, http.StatusOK, listResult(items[start:end], next))
	return nil
}

// listResult is a page of a list answer as the SDK models encode it: nextLink (when there is a
// next page) and value.
func listResult(items []any, next *string) map[string]any {
	res := map[string]any{"value": append([]any{}, items...)}
	if next != nil {
		res["nextLink"] = next
	}
	return res
}

// topLevelItems lists the resources of a map keyed by lower-case ID below the collection a
// request addresses, in ID order, as view shows them; s.mu is held.
func topLevelItems[T any](q *armRequest, m map[string]*T, view func(*T) any) []any {
	prefix := strings.ToLower(q.id(len(q.route.segs))) + "/"
	var out []any
	for _, key := range sortedKeys(m) {
		if strings.HasPrefix(key, prefix) {
			out = append(out, view(m[key]))
		}
	}
	return out
}

// ResourceIDs lists the resources of a resource group (virtual networks, route tables, network
// security groups, public IP addresses, load balancers, network interfaces, virtual machines,
// scale sets, images, user-assigned identities and role assignments), sorted: what a test checks a destroy left behind.
func (s *Server) ResourceIDs(group string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, r := range s.groupResources(group) {
		out = append(out, r.id)
	}
	sort.Strings(out)
	return out
}

// groupResource is a resource the store keeps in a resource group: its ID, its kind and the
// stored resource, as the kind's find returns it.
type groupResource struct {
	id   string
	kind *kind
	r    any
}

// groupResources returns the resources of a group, in no order: top-level resources, the routes
// of its route tables and its role assignments (subnets, kept with their virtual network, and
// scale-set instances are left out); s.mu is held.
func (s *Server) groupResources(group string) []groupResource {
	prefix := strings.ToLower(s.ResourceGroupID(group)) + "/"
	var out []groupResource
	add := func(k *kind, id string, r any) {
		if strings.HasPrefix(strings.ToLower(id), prefix) {
			out = append(out, groupResource{id: id, kind: k, r: r})
		}
	}
	for _, v := range s.vnets {
		add(&vnetKind, v.id, v)
	}
	for _, t := range s.tables {
		add(&routeTableKind, t.id, t)
		for _, r := range t.routes {
			add(&routeKind, r.id, r)
		}
	}
	for _, o := range s.objects {
		add(kindOf(o.typ), o.id, o)
	}
	for _, vm := range s.vms {
		add(&vmKind, vm.id, vm)
	}
	for _, ss := range s.scaleSets {
		add(&scaleSetKind, ss.id, ss)
	}
	for _, im := range s.images {
		if im.version {
			add(&imageVersionKind, im.id, im)
		} else {
			add(&managedImageKind, im.id, im)
		}
	}
	for _, u := range s.userIdentities {
		add(&identityKind, u.id, u)
	}
	for _, a := range s.roleAssignments {
		add(&roleAssignmentKind, a.id, a)
	}
	return out
}

// kindOf returns the store's kind of a resource type.
func kindOf(typ string) *kind {
	for _, k := range kinds {
		if strings.EqualFold(k.typ, typ) {
			return k
		}
	}
	panic("armtest: no kind of type " + typ)
}

// newETag is a new etag, in the form Network gives them: W/"<uuid>"
// (kubernetes-sigs/cluster-api-provider-azure#682 quotes one in a route table's 412).
func newETag() string { return `W/"` + newUUID() + `"` }

// checkIfMatch applies a PUT's If-Match header to a resource whose etag is etag (exists false:
// none yet), as ARM's resource provider contract tabulates it (Azure/azure-resource-manager-rpc
// v1.0/Addendum.md, ETags for Resources): no header, or "*" on an existing resource, passes; any
// other value must be the resource's etag, else 412 Precondition Failed. The error is Network's
// answer to a route table written with a stale etag, as kubernetes-sigs/cluster-api-provider-azure#682
// quotes it: PreconditionFailed, "Precondition failed.", detail PreconditionFailedEtagMismatch
// (the detail's wording for a resource that does not exist is this server's own).
func checkIfMatch(q *armRequest, etag string, exists bool) *apiError {
	want := q.r.Header.Get("If-Match")
	if want == "" || exists && (want == "*" || want == etag) {
		return nil
	}
	e := newError(http.StatusPreconditionFailed, "PreconditionFailed", "Precondition failed.")
	detail := fmt.Sprintf("Etag provided in if-match header %s does not match etag %s of resource %s.", want, etag, q.resourceID())
	if !exists {
		detail = fmt.Sprintf("If-match header %s was provided for resource %s, which does not exist.", want, q.resourceID())
	}
	e.Details = []*apiError{{Code: "PreconditionFailedEtagMismatch", Message: detail}}
	return e
}
