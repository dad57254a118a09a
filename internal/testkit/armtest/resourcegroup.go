package armtest

import (
	"encoding/json"
	"net/http"
	"regexp"
	"sort"
	"strings"
)

// Resource groups as Microsoft.Resources serves them
// (https://learn.microsoft.com/rest/api/resources/resource-groups): created or updated by PUT,
// read, listed with a tag filter, and deleted with everything they hold by a long-running DELETE.

// ResourcesAPIVersion is the api-version of the resource groups API the server serves (that of
// the SDK's armresources module).
const ResourcesAPIVersion = "2021-04-01"

const typeResourceGroup = "Microsoft.Resources/resourceGroups"

// resourceGroup is a resource group: the store keeps its resources by ID under its name.
type resourceGroup struct {
	name, location string
	tags           map[string]string
	deleting       bool
}

// groupName is the rule of https://learn.microsoft.com/azure/azure-resource-manager/management/resource-name-rules#microsoftresources:
// 1-90 characters: letters, digits, underscores, parentheses, hyphens and periods, not ending in a period.
var groupName = regexp.MustCompile(`^[\p{L}\p{N}_().-]{0,89}[\p{L}\p{N}_()-]$`)

// groupRoutes are the routes of resource groups. Their literal segment is "resourcegroups", as the
// SDK spells it; they are outside the check that a request's group exists (routing.go).
var groupRoutes = []armRoute{
	{segs: split("subscriptions/{}/resourcegroups/{}"), typ: typeResourceGroup, versions: []string{ResourcesAPIVersion},
		methods: map[string]armHandler{http.MethodPut: (*Server).putGroup, http.MethodGet: (*Server).getGroup, http.MethodDelete: (*Server).deleteGroup}},
	{segs: split("subscriptions/{}/resourcegroups"), typ: typeResourceGroup, versions: []string{ResourcesAPIVersion},
		methods: map[string]armHandler{http.MethodGet: (*Server).listGroups}},
}

func (s *Server) groupView(g *resourceGroup) map[string]any {
	state := "Succeeded"
	if g.deleting {
		state = "Deleting"
	}
	return map[string]any{
		"id": s.ResourceGroupID(g.name), "name": g.name, "type": typeResourceGroup, "location": g.location,
		"tags": g.tags, "properties": map[string]any{"provisioningState": state},
	}
}

func (s *Server) putGroup(w http.ResponseWriter, q *armRequest) *apiError {
	name := q.name(1)
	var body struct {
		Location string            `json:"location"`
		Tags     map[string]string `json:"tags"`
	}
	if err := json.Unmarshal(q.body, &body); err != nil {
		return newError(http.StatusBadRequest, "InvalidRequestContent", "The request content was invalid and could not be deserialized: %v.", err)
	}
	if !groupName.MatchString(name) {
		return newError(http.StatusBadRequest, "InvalidResourceGroup",
			"The provided resource group name '%s' has these invalid characters: '%s'. "+
				"The name can only be a letter, digit, '-', '.', '(', ')' or '_'.", name, name)
	}
	if body.Location == "" {
		return newError(http.StatusBadRequest, "LocationRequired", "The location property is required for this definition.")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	g, status := s.groups[strings.ToLower(name)], http.StatusOK
	switch {
	case g != nil && g.deleting:
		return newError(http.StatusConflict, "ResourceGroupBeingDeleted",
			"The resource group '%s' is in deprovisioning state and cannot perform this operation.", g.name)
	case g != nil && !strings.EqualFold(normalLocation(g.location), normalLocation(body.Location)):
		return newError(http.StatusConflict, "InvalidResourceGroupLocation",
			"Invalid resource group location '%s'. The Resource group already exists in location '%s'.", body.Location, g.location)
	case g == nil:
		g, status = &resourceGroup{name: name, location: body.Location}, http.StatusCreated
		s.groups[strings.ToLower(name)] = g
	}
	g.tags = map[string]string{}
	for k, v := range body.Tags {
		g.tags[k] = v
	}
	writeJSON(w, status, s.groupView(g))
	return nil
}

// normalLocation is a location as ARM compares them: "West Europe" is "westeurope".
func normalLocation(l string) string { return strings.ToLower(strings.ReplaceAll(l, " ", "")) }

func (s *Server) getGroup(w http.ResponseWriter, q *armRequest) *apiError {
	s.mu.Lock()
	defer s.mu.Unlock()
	g := s.groups[strings.ToLower(q.name(1))]
	if g == nil {
		return newError(http.StatusNotFound, "ResourceGroupNotFound", "Resource group '%s' could not be found.", q.name(1))
	}
	writeJSON(w, http.StatusOK, s.groupView(g))
	return nil
}

// listGroups lists the subscription's groups. $filter takes the forms the API documents for it:
// "tagName eq 'name'" and "tagName eq 'name' and tagValue eq 'value'".
func (s *Server) listGroups(w http.ResponseWriter, q *armRequest) *apiError {
	tagName, tagValue, e := tagFilter(q.r.URL.Query().Get("$filter"))
	if e != nil {
		return e
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	names := make([]string, 0, len(s.groups))
	for k := range s.groups {
		names = append(names, k)
	}
	sort.Strings(names)
	var items []any
	for _, k := range names {
		g := s.groups[k]
		v, tagged := g.tags[tagName]
		if tagName == "" || (tagged && (tagValue == nil || v == *tagValue)) {
			items = append(items, s.groupView(g))
		}
	}
	start, end, next, e := s.page(q, len(items))
	if e != nil {
		return e
	}
	writeJSON(w, http.StatusOK, listResult(items[start:end], next))
	return nil
}

var tagFilterForm = regexp.MustCompile(`^tagName eq '([^']*)'(?: and tagValue eq '([^']*)')?$`)

func tagFilter(f string) (string, *string, *apiError) {
	if f == "" {
		return "", nil, nil
	}
	m := tagFilterForm.FindStringSubmatch(strings.TrimSpace(f))
	if m == nil {
		return "", nil, newError(http.StatusBadRequest, "InvalidFilterInQueryString",
			"Invalid $filter '%s' specified in the query string. Resource groups filter by tagName eq 'name' [and tagValue eq 'value'].", f)
	}
	if strings.Contains(f, "tagValue") {
		return m[1], &m[2], nil
	}
	return m[1], nil, nil
}

// deleteGroup deletes a group and every resource in it, as one long-running operation: 202 with
// Location, the group reading "Deleting" until it ends.
func (s *Server) deleteGroup(w http.ResponseWriter, q *armRequest) *apiError {
	s.mu.Lock()
	defer s.mu.Unlock()
	g := s.groups[strings.ToLower(q.name(1))]
	if g == nil {
		return newError(http.StatusNotFound, "ResourceGroupNotFound", "Resource group '%s' could not be found.", q.name(1))
	}
	if g.deleting {
		w.WriteHeader(http.StatusAccepted)
		return nil
	}
	g.deleting = true
	op := s.startOperation(q, s.ResourceGroupID(g.name), func(failure *apiError) func() {
		if failure != nil {
			g.deleting = false
			return nil
		}
		return s.removeGroup(g)
	})
	s.writeStarted(w, op, http.StatusAccepted, nil)
	return nil
}

// removeGroup removes a group and its resources, compute first, then networking; s.mu is held.
// It returns what shuts the group's machines down.
func (s *Server) removeGroup(g *resourceGroup) func() {
	prefix := strings.ToLower(s.ResourceGroupID(g.name)) + "/"
	in := func(id string) bool { return strings.HasPrefix(strings.ToLower(id), prefix) }
	var changes []*change
	for _, ss := range s.scaleSets {
		if in(ss.id) {
			changes = append(changes, s.removeScaleSet(ss))
		}
	}
	for _, vm := range s.vms {
		if in(vm.id) {
			changes = append(changes, s.removeVM(vm))
		}
	}
	for _, o := range s.objects {
		if in(o.id) {
			changes = append(changes, s.removeObject(o))
		}
	}
	for _, rt := range s.tables {
		if in(rt.id) {
			changes = append(changes, routeTableKind.remove(s, nil, rt))
		}
	}
	for _, v := range s.vnets {
		if in(v.id) {
			changes = append(changes, vnetKind.remove(s, nil, v))
		}
	}
	var after []func()
	for _, c := range changes {
		if f := c.commit(nil); f != nil {
			after = append(after, f)
		}
	}
	for k, im := range s.images {
		if in(im.id) {
			delete(s.images, k)
		}
	}
	delete(s.groups, strings.ToLower(g.name))
	return func() {
		for _, f := range after {
			f()
		}
	}
}

// HasResourceGroup reports whether a resource group exists (being deleted counts).
func (s *Server) HasResourceGroup(name string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.groups[strings.ToLower(name)] != nil
}

// ResourceGroupTags returns a group's tags, nil when there is no such group.
func (s *Server) ResourceGroupTags(name string) map[string]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	g := s.groups[strings.ToLower(name)]
	if g == nil {
		return nil
	}
	out := map[string]string{}
	for k, v := range g.tags {
		out[k] = v
	}
	return out
}
