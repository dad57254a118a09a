package armtest

import (
	"cmp"
	"net/http"
	"strings"
)

// armHandler serves one method of one route. It writes the answer itself, or returns the error to
// answer with.
type armHandler func(s *Server, w http.ResponseWriter, q *armRequest) *apiError

// armRoute is a path pattern of the ARM API. In segs, "{}" stands for a name; literal segments
// match case-insensitively, as ARM does.
type armRoute struct {
	segs     []string
	typ      string   // resource type the path addresses, counted for writes; empty: not a resource
	versions []string // accepted api-versions; empty: any
	methods  map[string]armHandler
	kind     *kind // the store's kind of a resource or collection route; nil: an action route
}

// Paths of the resources the server serves.
const (
	groupPath    = "subscriptions/{}/resourceGroups/{}/providers/"
	networkPath  = groupPath + "Microsoft.Network/"
	scaleSetPath = groupPath + "Microsoft.Compute/virtualMachineScaleSets/{}"
	vmPath       = groupPath + "Microsoft.Compute/virtualMachines/{}"
	vnetPath     = networkPath + "virtualNetworks/{}"
	tablePath    = networkPath + "routeTables/{}"
)

// Resource types the server serves.
const (
	typeScaleSet     = "Microsoft.Compute/virtualMachineScaleSets"
	typeScaleSetVM   = "Microsoft.Compute/virtualMachineScaleSets/virtualMachines"
	typeScaleSetNIC  = "Microsoft.Compute/virtualMachineScaleSets/networkInterfaces"
	typeImage        = "Microsoft.Compute/images"
	typeImageVersion = "Microsoft.Compute/galleries/images/versions"
	typeRouteTable   = "Microsoft.Network/routeTables"
	typeRoute        = "Microsoft.Network/routeTables/routes"
	typeVNet         = "Microsoft.Network/virtualNetworks"
	typeSubnet       = "Microsoft.Network/virtualNetworks/subnets"
	typeNSG          = "Microsoft.Network/networkSecurityGroups"
	typePublicIP     = "Microsoft.Network/publicIPAddresses"
	typeLoadBalancer = "Microsoft.Network/loadBalancers"
	typeNIC          = "Microsoft.Network/networkInterfaces"
	typeVM           = "Microsoft.Compute/virtualMachines"
	typeNatGateway   = "Microsoft.Network/natGateways"
)

// kinds are the resource types of the store (store.go).
var kinds = []*kind{
	&scaleSetKind, &managedImageKind, &imageVersionKind, &routeTableKind, &routeKind, &vnetKind, &subnetKind,
	&nsgKind, &publicIPKind, &loadBalancerKind, &nicKind, &vmKind, &natGatewayKind, &identityKind, &roleAssignmentKind,
}

// actionRoutes are the routes outside the store: instances of scale sets, actions (POST) and
// long-running operations.
var actionRoutes = []armRoute{
	{segs: split(scaleSetPath + "/delete"), typ: typeScaleSet, versions: []string{ComputeAPIVersion},
		methods: map[string]armHandler{http.MethodPost: (*Server).deleteInstances}},
	{segs: split(scaleSetPath + "/manualupgrade"), typ: typeScaleSet, versions: []string{ComputeAPIVersion},
		methods: map[string]armHandler{http.MethodPost: (*Server).updateInstances}},
	{segs: split(scaleSetPath + "/virtualMachines"), typ: typeScaleSetVM, versions: []string{ComputeAPIVersion},
		methods: map[string]armHandler{http.MethodGet: (*Server).listInstances}},
	{segs: split(scaleSetPath + "/virtualMachines/{}"), typ: typeScaleSetVM, versions: []string{ComputeAPIVersion},
		methods: map[string]armHandler{http.MethodGet: (*Server).getInstance, http.MethodDelete: (*Server).deleteInstance}},
	{segs: split(scaleSetPath + "/virtualMachines/{}/retrieveBootDiagnosticsData"), typ: typeScaleSetVM, versions: []string{ComputeAPIVersion},
		methods: map[string]armHandler{http.MethodPost: (*Server).retrieveBootDiagnostics}},
	{segs: split(scaleSetPath + "/virtualMachines/{}/runCommand"), typ: typeScaleSetVM, versions: []string{ComputeAPIVersion},
		methods: map[string]armHandler{http.MethodPost: (*Server).runInstanceCommand}},
	{segs: split(scaleSetPath + "/networkInterfaces"), typ: typeScaleSetNIC, versions: []string{ScaleSetNICAPIVersion},
		methods: map[string]armHandler{http.MethodGet: (*Server).listScaleSetNICs}},
	{segs: split(vmPath + "/runCommand"), typ: typeVM, versions: []string{ComputeAPIVersion},
		methods: map[string]armHandler{http.MethodPost: (*Server).runCommand}},
	{segs: split(vmPath + "/retrieveBootDiagnosticsData"), typ: typeVM, versions: []string{ComputeAPIVersion},
		methods: map[string]armHandler{http.MethodPost: (*Server).retrieveVMBootDiagnostics}},
	{segs: split("subscriptions/{}/providers/{}/locations/{}/operations/{}"),
		methods: map[string]armHandler{http.MethodGet: (*Server).getOperationStatus}},
	{segs: split("subscriptions/{}/providers/{}/locations/{}/operationResults/{}"),
		methods: map[string]armHandler{http.MethodGet: (*Server).getOperationResult}},
}

// armRoutes are the store's routes, one per kind and one per listed collection, and the action
// routes. No two routes match the same path.
var armRoutes = buildRoutes()

func buildRoutes() []armRoute {
	var out []armRoute
	for _, k := range kinds {
		methods := map[string]armHandler{http.MethodGet: (*Server).getResource}
		if k.model != nil {
			methods[http.MethodPut] = (*Server).putResource
		}
		if k.patch != nil {
			methods[http.MethodPatch] = (*Server).patchResource
		}
		if k.remove != nil {
			methods[http.MethodDelete] = (*Server).deleteResource
		}
		segs := split(k.path)
		out = append(out, armRoute{segs: segs, typ: k.typ, versions: []string{k.version}, kind: k, methods: methods})
		if k.list {
			out = append(out, armRoute{segs: segs[:len(segs)-1], typ: k.typ, versions: []string{k.version}, kind: k,
				methods: map[string]armHandler{http.MethodGet: (*Server).listResources}})
		}
	}
	out = append(out, groupRoutes...)
	out = append(out, resourceRoutes...)
	out = append(out, permissionRoutes...)
	return append(out, actionRoutes...)
}

func split(path string) []string { return strings.Split(strings.Trim(path, "/"), "/") }

// armRequest is a request matched to a route.
type armRequest struct {
	r          *http.Request
	body       []byte
	route      *armRoute
	segs       []string // the request's path segments
	group      string   // the resource group's name as registered, "" outside a group
	apiVersion string
	caller     *claims // the token's claims: who asks
}

// name returns the i-th name in the path (0: subscription, 1: resource group or namespace, ...).
func (q *armRequest) name(i int) string {
	n := 0
	for j, p := range q.route.segs {
		if p == "{}" {
			if n == i {
				return q.segs[j]
			}
			n++
		}
	}
	return ""
}

// id returns the resource ID made of the first n path segments, with the route's spelling of
// literal segments and the registered spelling of the resource group.
func (q *armRequest) id(n int) string {
	var b strings.Builder
	for i := 0; i < n; i++ {
		seg := q.route.segs[i]
		switch {
		case i == 3 && q.group != "":
			seg = q.group
		case seg == "{}":
			seg = q.segs[i]
		}
		b.WriteString("/" + seg)
	}
	return b.String()
}

// resourceID is the ID of the resource the path addresses (the whole path for resource routes).
func (q *armRequest) resourceID() string { return q.id(len(q.route.segs)) }

// templateName is the resource's name as an ARM template writes it: its names below the
// resource group joined with '/' (e.g. "rt/route1").
func (q *armRequest) templateName() string {
	var names []string
	for i := 4; i < len(q.route.segs); i++ {
		if q.route.segs[i] == "{}" {
			names = append(names, q.segs[i])
		}
	}
	return strings.Join(names, "/")
}

func (s *Server) serveARM(w *statusRecorder, r *http.Request, body []byte) {
	segs := split(r.URL.Path)
	subscription := ""
	if len(segs) > 1 {
		subscription = segs[1]
	}
	s.mu.Lock()
	tenant := s.tenantOf(subscription)
	s.mu.Unlock()
	// A subscription the server does not know is refused once the token is checked.
	caller, e := s.authenticate(w, r, cmp.Or(tenant, s.opts.TenantID))
	if e != nil {
		writeError(w, e)
		return
	}
	s.mu.Lock()
	throttled := s.throttle.admit(w.Header(), r.Method, segs, s.opts.SubscriptionID)
	s.mu.Unlock()
	if throttled != nil {
		writeError(w, throttled)
		return
	}
	if tenant == "" {
		writeError(w, newError(http.StatusNotFound, "SubscriptionNotFound", "The subscription '%s' could not be found.", subscription))
		return
	}
	route := matchRoute(segs)
	if route == nil {
		writeError(w, newError(http.StatusNotFound, "InvalidResourceType",
			"armtest does not serve %s %s: it implements the resource group, virtual machine, scale set, image, route table, virtual network, "+
				"subnet, network security group, public IP address, load balancer, NAT gateway and network interface APIs kubewin uses",
			r.Method, r.URL.Path))
		return
	}
	q := &armRequest{r: r, body: body, route: route, segs: segs, apiVersion: r.URL.Query().Get("api-version"), caller: caller}
	if q.apiVersion == "" {
		writeError(w, newError(http.StatusBadRequest, "MissingApiVersionParameter",
			"The api-version query parameter (?api-version=) is required for all requests."))
		return
	}
	if len(route.versions) > 0 && !contains(route.versions, q.apiVersion) {
		writeError(w, newError(http.StatusBadRequest, "InvalidApiVersionParameter",
			"The api-version '%s' is invalid. The supported versions are '%s'.", q.apiVersion, strings.Join(route.versions, ",")))
		return
	}
	h := route.methods[r.Method]
	if h == nil {
		writeError(w, newError(http.StatusMethodNotAllowed, "MethodNotAllowed", "The method %s is not allowed on %s.", r.Method, r.URL.Path))
		return
	}
	// Another tenant's subscription holds only the images seeded in it (AddTenant, AddImage), and its
	// resource groups are not the server's.
	other := tenant != s.opts.TenantID
	if other && (r.Method != http.MethodGet || route.kind != &managedImageKind && route.kind != &imageVersionKind) {
		writeError(w, newError(http.StatusNotFound, "InvalidResourceType",
			"armtest serves %s %s only in its own subscription %s: in subscription %s, of tenant %s, it serves GET of the images seeded there",
			r.Method, r.URL.Path, s.opts.SubscriptionID, subscription, tenant))
		return
	}
	if route.segs[2] == "resourceGroups" && !other {
		s.mu.Lock()
		if g := s.groups[strings.ToLower(segs[3])]; g != nil {
			q.group = g.name
		}
		s.mu.Unlock()
		if q.group == "" {
			writeError(w, newError(http.StatusNotFound, "ResourceGroupNotFound", "Resource group '%s' could not be found.", segs[3]))
			return
		}
	}
	if e := s.authorize(q); e != nil {
		writeError(w, e)
		return
	}
	w.resourceType = route.typ
	if e := h(s, w, q); e != nil {
		writeError(w, e)
	}
}

func matchRoute(segs []string) *armRoute {
	for i := range armRoutes {
		rt := &armRoutes[i]
		if len(rt.segs) != len(segs) {
			continue
		}
		ok := true
		for j, p := range rt.segs {
			if p != "{}" && !strings.EqualFold(p, segs[j]) {
				ok = false
				break
			}
		}
		if ok {
			return rt
		}
	}
	return nil
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// AddResourceGroup registers a resource group; ARM requests into an unknown group get 404
// ResourceGroupNotFound.
func (s *Server) AddResourceGroup(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.addGroup(name)
}

// addGroup registers name, in the server's location, unless a group of that name exists; s.mu
// is held.
func (s *Server) addGroup(name string) {
	if _, ok := s.groups[strings.ToLower(name)]; !ok {
		s.groups[strings.ToLower(name)] = &resourceGroup{name: name, location: s.opts.Location, tags: map[string]string{}}
	}
}

// ResourceGroupID is the ID of a resource group of the server's subscription.
func (s *Server) ResourceGroupID(group string) string {
	return "/subscriptions/" + s.opts.SubscriptionID + "/resourceGroups/" + group
}
