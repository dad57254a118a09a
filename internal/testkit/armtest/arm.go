package armtest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"reflect"
	"strconv"
	"strings"
	"time"
)

// apiError is an ARM error: {"error": {"code", "message", "target", "details"}}.
type apiError struct {
	status     int
	retryAfter time.Duration
	Code       string      `json:"code"`
	Message    string      `json:"message"`
	Target     string      `json:"target,omitempty"`
	Details    []*apiError `json:"details,omitempty"`
}

func newError(status int, code, format string, args ...any) *apiError {
	return &apiError{status: status, Code: code, Message: fmt.Sprintf(format, args...)}
}

func (e *apiError) Error() string { return e.Code + ": " + e.Message }

// invalidParameter is Compute's answer to a bad value, naming the property in target.
func invalidParameter(target, format string, args ...any) *apiError {
	e := newError(http.StatusBadRequest, "InvalidParameter", format, args...)
	e.Target = target
	return e
}

func writeError(w http.ResponseWriter, e *apiError) {
	h := w.Header()
	h.Set("Content-Type", "application/json; charset=utf-8")
	h.Set("x-ms-error-code", e.Code)
	if e.retryAfter > 0 {
		setRetryAfter(h, e.retryAfter)
	}
	w.WriteHeader(e.status)
	_ = json.NewEncoder(w).Encode(map[string]*apiError{"error": e})
}

// setRetryAfter writes Retry-After in whole seconds (rounded up, as ARM sends it) and, for a
// delay that is not a whole number of seconds, retry-after-ms, which azcore reads first.
func setRetryAfter(h http.Header, d time.Duration) {
	h.Set("Retry-After", strconv.Itoa(int((d+time.Second-1)/time.Second)))
	if d%time.Second != 0 {
		h.Set("retry-after-ms", strconv.FormatInt(d.Milliseconds(), 10))
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

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
}

const (
	scaleSetPath = "subscriptions/{}/resourceGroups/{}/providers/Microsoft.Compute/virtualMachineScaleSets"
	vnetPath     = "subscriptions/{}/resourceGroups/{}/providers/Microsoft.Network/virtualNetworks/{}"
	tablePath    = "subscriptions/{}/resourceGroups/{}/providers/Microsoft.Network/routeTables/{}"
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
)

const (
	networkPath = "subscriptions/{}/resourceGroups/{}/providers/Microsoft.Network/"
	vmPath      = "subscriptions/{}/resourceGroups/{}/providers/Microsoft.Compute/virtualMachines/{}"
)

var armRoutes = []armRoute{
	{segs: split(scaleSetPath), typ: typeScaleSet, versions: []string{ComputeAPIVersion},
		methods: map[string]armHandler{http.MethodGet: (*Server).listScaleSets}},
	{segs: split(scaleSetPath + "/{}"), typ: typeScaleSet, versions: []string{ComputeAPIVersion},
		methods: map[string]armHandler{
			http.MethodGet: (*Server).getScaleSet, http.MethodPut: (*Server).putScaleSet,
			http.MethodPatch: (*Server).patchScaleSet, http.MethodDelete: (*Server).deleteScaleSet,
		}},
	{segs: split(scaleSetPath + "/{}/delete"), typ: typeScaleSet, versions: []string{ComputeAPIVersion},
		methods: map[string]armHandler{http.MethodPost: (*Server).deleteInstances}},
	{segs: split(scaleSetPath + "/{}/virtualMachines"), typ: typeScaleSetVM, versions: []string{ComputeAPIVersion},
		methods: map[string]armHandler{http.MethodGet: (*Server).listInstances}},
	{segs: split(scaleSetPath + "/{}/virtualMachines/{}"), typ: typeScaleSetVM, versions: []string{ComputeAPIVersion},
		methods: map[string]armHandler{http.MethodGet: (*Server).getInstance, http.MethodDelete: (*Server).deleteInstance}},
	{segs: split(scaleSetPath + "/{}/virtualMachines/{}/retrieveBootDiagnosticsData"), typ: typeScaleSetVM, versions: []string{ComputeAPIVersion},
		methods: map[string]armHandler{http.MethodPost: (*Server).retrieveBootDiagnostics}},
	{segs: split(scaleSetPath + "/{}/networkInterfaces"), typ: typeScaleSetNIC, versions: []string{ScaleSetNICAPIVersion},
		methods: map[string]armHandler{http.MethodGet: (*Server).listScaleSetNICs}},
	{segs: split("subscriptions/{}/resourceGroups/{}/providers/Microsoft.Compute/images/{}"), typ: typeImage, versions: []string{ComputeAPIVersion},
		methods: map[string]armHandler{http.MethodGet: (*Server).getImage}},
	{segs: split("subscriptions/{}/resourceGroups/{}/providers/Microsoft.Compute/galleries/{}/images/{}/versions/{}"), typ: typeImageVersion, versions: []string{GalleryAPIVersion},
		methods: map[string]armHandler{http.MethodGet: (*Server).getImage}},
	{segs: split(tablePath), typ: typeRouteTable, versions: []string{NetworkAPIVersion},
		methods: map[string]armHandler{
			http.MethodGet: (*Server).getRouteTable, http.MethodPut: (*Server).putRouteTable, http.MethodDelete: (*Server).deleteRouteTable,
		}},
	{segs: split(tablePath + "/routes"), typ: typeRoute, versions: []string{NetworkAPIVersion},
		methods: map[string]armHandler{http.MethodGet: (*Server).listRoutes}},
	{segs: split(tablePath + "/routes/{}"), typ: typeRoute, versions: []string{NetworkAPIVersion},
		methods: map[string]armHandler{
			http.MethodGet: (*Server).getRoute, http.MethodPut: (*Server).putRoute, http.MethodDelete: (*Server).deleteRoute,
		}},
	{segs: split(vnetPath), typ: typeVNet, versions: []string{NetworkAPIVersion},
		methods: map[string]armHandler{http.MethodGet: (*Server).getVirtualNetwork, http.MethodPut: (*Server).putVirtualNetwork, http.MethodDelete: (*Server).deleteVirtualNetwork}},
	{segs: split(networkPath + "networkSecurityGroups/{}"), typ: typeNSG, versions: []string{NetworkAPIVersion},
		methods: map[string]armHandler{http.MethodGet: (*Server).getObject, http.MethodPut: (*Server).putNSG, http.MethodDelete: (*Server).deleteObject}},
	{segs: split(networkPath + "publicIPAddresses/{}"), typ: typePublicIP, versions: []string{NetworkAPIVersion},
		methods: map[string]armHandler{http.MethodGet: (*Server).getObject, http.MethodPut: (*Server).putPublicIP, http.MethodDelete: (*Server).deleteObject}},
	{segs: split(networkPath + "loadBalancers/{}"), typ: typeLoadBalancer, versions: []string{NetworkAPIVersion},
		methods: map[string]armHandler{http.MethodGet: (*Server).getObject, http.MethodPut: (*Server).putLoadBalancer, http.MethodDelete: (*Server).deleteObject}},
	{segs: split(networkPath + "networkInterfaces/{}"), typ: typeNIC, versions: []string{NetworkAPIVersion},
		methods: map[string]armHandler{http.MethodGet: (*Server).getObject, http.MethodPut: (*Server).putNIC, http.MethodDelete: (*Server).deleteObject}},
	{segs: split(vmPath), typ: typeVM, versions: []string{ComputeAPIVersion},
		methods: map[string]armHandler{http.MethodGet: (*Server).getVM, http.MethodPut: (*Server).putVM, http.MethodDelete: (*Server).deleteVM}},
	{segs: split(vmPath + "/runCommand"), typ: typeVM, versions: []string{ComputeAPIVersion},
		methods: map[string]armHandler{http.MethodPost: (*Server).runCommand}},
	{segs: split(vmPath + "/retrieveBootDiagnosticsData"), typ: typeVM, versions: []string{ComputeAPIVersion},
		methods: map[string]armHandler{http.MethodPost: (*Server).retrieveVMBootDiagnostics}},
	{segs: split(vnetPath + "/subnets/{}"), typ: typeSubnet, versions: []string{NetworkAPIVersion},
		methods: map[string]armHandler{http.MethodGet: (*Server).getSubnet, http.MethodPut: (*Server).putSubnet}},
	{segs: split("subscriptions/{}/providers/{}/locations/{}/operations/{}"),
		methods: map[string]armHandler{http.MethodGet: (*Server).getOperationStatus}},
	{segs: split("subscriptions/{}/providers/{}/locations/{}/operationResults/{}"),
		methods: map[string]armHandler{http.MethodGet: (*Server).getOperationResult}},
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
	if e := s.authenticate(w, r); e != nil {
		writeError(w, e)
		return
	}
	segs := split(r.URL.Path)
	if len(segs) < 2 || !strings.EqualFold(segs[1], s.opts.SubscriptionID) {
		writeError(w, newError(http.StatusNotFound, "SubscriptionNotFound", "The subscription '%s' could not be found.", segs[1]))
		return
	}
	route := matchRoute(segs)
	if route == nil {
		writeError(w, newError(http.StatusNotFound, "InvalidResourceType",
			"armtest does not serve %s %s: it implements the virtual machine, scale set, image, route table, virtual network, subnet, network security group, public IP address, load balancer and network interface APIs kubewin uses", r.Method, r.URL.Path))
		return
	}
	q := &armRequest{r: r, body: body, route: route, segs: segs, apiVersion: r.URL.Query().Get("api-version")}
	if q.apiVersion == "" {
		writeError(w, newError(http.StatusBadRequest, "MissingApiVersionParameter", "The api-version query parameter (?api-version=) is required for all requests."))
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
	if route.segs[2] == "resourceGroups" {
		s.mu.Lock()
		q.group = s.groups[strings.ToLower(segs[3])]
		s.mu.Unlock()
		if q.group == "" {
			writeError(w, newError(http.StatusNotFound, "ResourceGroupNotFound", "Resource group '%s' could not be found.", segs[3]))
			return
		}
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

// addGroup registers name unless a group of that name exists; s.mu is held.
func (s *Server) addGroup(name string) {
	if _, ok := s.groups[strings.ToLower(name)]; !ok {
		s.groups[strings.ToLower(name)] = name
	}
}

// ResourceGroupID is the ID of a resource group of the server's subscription.
func (s *Server) ResourceGroupID(group string) string {
	return "/subscriptions/" + s.opts.SubscriptionID + "/resourceGroups/" + group
}

// decodeBody checks a PUT or PATCH body against the JSON Schemas (when the server has them) and
// decodes it into v, an azure-sdk-for-go model. Fields the model does not know and values of the
// wrong type are rejected with 400 InvalidRequestContent, as ARM rejects them.
func (s *Server) decodeBody(q *armRequest, v json.Unmarshaler) *apiError {
	if len(q.body) == 0 {
		return newError(http.StatusBadRequest, "InvalidRequestContent", "The request content was invalid and could not be deserialized: the body is empty.")
	}
	if s.schemas != nil {
		s.mu.Lock()
		s.validated++
		s.mu.Unlock()
		if e := s.schemas.validate(q.route.typ, q.apiVersion, q.templateName(), q.body, q.r.Method == http.MethodPatch); e != nil {
			return e
		}
	}
	return decodeStrict(q.body, v)
}

// decodeStrict unmarshals body into v and rejects members v does not keep: the SDK models ignore
// unknown members, so the body is compared with v marshalled again.
func decodeStrict(body []byte, v json.Unmarshaler) *apiError {
	typeName := reflect.TypeOf(v).Elem().Name()
	if err := json.Unmarshal(body, v); err != nil {
		return newError(http.StatusBadRequest, "InvalidRequestContent",
			"The request content was invalid and could not be deserialized as %s: %v", typeName, err)
	}
	var sent, kept any
	again, err := json.Marshal(v)
	if err != nil {
		return newError(http.StatusInternalServerError, "InternalServerError", "re-encoding %s: %v", typeName, err)
	}
	if json.Unmarshal(body, &sent) != nil || json.Unmarshal(again, &kept) != nil {
		return newError(http.StatusBadRequest, "InvalidRequestContent", "The request content was invalid and could not be deserialized: not JSON.")
	}
	if p := unknownMember(sent, kept, ""); p != "" {
		return newError(http.StatusBadRequest, "InvalidRequestContent",
			"The request content was invalid and could not be deserialized: could not find member '%s' of a %s body (JSON pointer %s); remove it or check its spelling.",
			p[strings.LastIndex(p, "/")+1:], typeName, p)
	}
	return nil
}

// unknownMember returns the JSON pointer of the first non-null member of sent missing from kept.
func unknownMember(sent, kept any, path string) string {
	switch sv := sent.(type) {
	case map[string]any:
		kv, _ := kept.(map[string]any)
		for _, k := range sortedKeys(sv) {
			if sv[k] == nil {
				continue
			}
			kk, ok := kv[k]
			if !ok {
				return path + "/" + k
			}
			if p := unknownMember(sv[k], kk, path+"/"+k); p != "" {
				return p
			}
		}
	case []any:
		ka, _ := kept.([]any)
		for i, e := range sv {
			p := path + "/" + strconv.Itoa(i)
			if i >= len(ka) {
				return p
			}
			if p := unknownMember(e, ka[i], p); p != "" {
				return p
			}
		}
	}
	return ""
}

// page cuts a list answer: it returns the range of items to send and the nextLink (nil on the last
// page). The skip token is the offset of the page.
func (s *Server) page(q *armRequest, total int) (start, end int, next *string, e *apiError) {
	if tok := q.r.URL.Query().Get("$skiptoken"); tok != "" {
		n, err := strconv.Atoi(tok)
		if err != nil || n < 0 {
			return 0, 0, nil, newError(http.StatusBadRequest, "InvalidSkipToken", "The skip token '%s' is not valid.", tok)
		}
		start = min(n, total)
	}
	end = min(start+s.opts.PageSize, total)
	if end < total {
		v := q.r.URL.Query()
		v.Set("$skiptoken", strconv.Itoa(end))
		link := s.url + q.r.URL.Path + "?" + v.Encode()
		next = &link
	}
	return start, end, next, nil
}

// expand returns the $expand query value, rejecting values other than allowed.
func expand(q *armRequest, allowed ...string) (string, *apiError) {
	v := q.r.URL.Query().Get("$expand")
	if v != "" && !contains(allowed, v) {
		return "", newError(http.StatusBadRequest, "InvalidParameter", "The value '%s' of $expand is not supported here; use one of %q.", v, allowed)
	}
	return v, nil
}

// rejectFilter refuses $filter, which the server does not evaluate: silently ignoring it would
// return more than the client asked for.
func rejectFilter(q *armRequest) *apiError {
	if f := q.r.URL.Query().Get("$filter"); f != "" {
		return newError(http.StatusBadRequest, "InvalidParameter", "armtest does not evaluate $filter (%q): list without it and filter the answer.", f)
	}
	return nil
}

// clone deep-copies an SDK model through its JSON form.
func clone[T any](v *T) *T {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("armtest: encoding %T: %v", v, err))
	}
	out := new(T)
	if err := json.Unmarshal(b, out); err != nil {
		panic(fmt.Sprintf("armtest: decoding %T: %v", v, err))
	}
	return out
}

// mergePatch applies an RFC 7386 JSON merge patch to doc, as ARM applies a PATCH body.
func mergePatch(doc, patch any) any {
	p, ok := patch.(map[string]any)
	if !ok {
		return patch
	}
	d, ok := doc.(map[string]any)
	if !ok {
		d = map[string]any{}
	}
	for k, v := range p {
		if v == nil {
			delete(d, k)
		} else {
			d[k] = mergePatch(d[k], v)
		}
	}
	return d
}

// queryBool reads an optional boolean query parameter.
func queryBool(q *armRequest, name string) (bool, *apiError) {
	v := q.r.URL.Query().Get(name)
	if v == "" {
		return false, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, newError(http.StatusBadRequest, "InvalidParameter", "The query parameter %s=%q is not a boolean; use true or false.", name, v)
	}
	return b, nil
}

// absoluteURL is the server URL of an ARM path and query.
func (s *Server) absoluteURL(path string, query url.Values) string {
	return s.url + path + "?" + query.Encode()
}
