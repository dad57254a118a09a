package armtest

import (
	"encoding/json"
	"net/http"
	"sort"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/resources/armresources"
)

// The resources of a resource group as Microsoft.Resources lists them ("Resources - List By
// Resource Group", https://learn.microsoft.com/rest/api/resources/resources/list-by-resource-group):
// GET /subscriptions/{s}/resourceGroups/{g}/resources lists the group's top-level resources with
// their id, name, type, location and tags. Child resources that are not tracked resources of their
// own (subnets, routes, scale-set instances) and extension resources (role assignments) are not
// listed. Gallery image versions, tracked resources, are listed as the server keeps them (it keeps
// no galleries or image definitions).

const typeGroupResources = "Microsoft.Resources/subscriptions/resourceGroups/resources"

// resourceRoutes is the route of the list. Its literal segment is "resourceGroups", so that a
// request into a group that does not exist gets 404 ResourceGroupNotFound (routing.go).
var resourceRoutes = []armRoute{
	{segs: split("subscriptions/{}/resourceGroups/{}/resources"), typ: typeGroupResources, versions: []string{ResourcesAPIVersion},
		methods: map[string]armHandler{http.MethodGet: (*Server).listGroupResources}},
}

// listed reports whether Resources - List By Resource Group lists resources of kind k: those
// whose parent is the group, role assignments (extension resources) excepted.
func listed(k *kind) bool { return k.parent == nil && k != &roleAssignmentKind }

// listGroupResources lists a group's top-level resources in ID order. $filter and $expand are
// refused (rejectFilter); $top is not applied.
func (s *Server) listGroupResources(w http.ResponseWriter, q *armRequest) *apiError {
	if e := rejectFilter(q); e != nil {
		return e
	}
	if _, e := expand(q); e != nil {
		return e
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var found []groupResource
	for _, r := range s.groupResources(q.group) {
		if listed(r.kind) {
			found = append(found, r)
		}
	}
	sort.Slice(found, func(i, j int) bool { return strings.ToLower(found[i].id) < strings.ToLower(found[j].id) })
	items := make([]any, 0, len(found))
	for _, r := range found {
		items = append(items, s.genericView(r))
	}
	start, end, next, e := s.page(q, len(items))
	if e != nil {
		return e
	}
	writeJSON(w, http.StatusOK, listResult(items[start:end], next))
	return nil
}

// genericView is a resource as the list shows it: its ID, its names below the group joined with
// '/' (e.g. "gallery/definition/1.0.0"), its type, and the location and tags its GET returns;
// s.mu is held.
func (s *Server) genericView(r groupResource) armresources.GenericResourceExpanded {
	var v struct {
		Location *string            `json:"location"`
		Tags     map[string]*string `json:"tags"`
	}
	if b, err := json.Marshal(r.kind.view(s, r.r, "")); err == nil {
		_ = json.Unmarshal(b, &v)
	}
	if len(v.Tags) == 0 {
		v.Tags = nil
	}
	// /subscriptions/{s}/resourceGroups/{g}/providers/{namespace}/{type}/{name}[/{type}/{name}...]
	segs := split(r.id)
	var names []string
	for i := 7; i < len(segs); i += 2 {
		names = append(names, segs[i])
	}
	return armresources.GenericResourceExpanded{
		ID: to.Ptr(r.id), Name: to.Ptr(strings.Join(names, "/")), Type: to.Ptr(r.kind.typ), Location: v.Location, Tags: v.Tags,
	}
}
