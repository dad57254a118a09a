package windows

import (
	"encoding/json"
	"errors"
	"strings"

	"github.com/Microsoft/hcsshim"
	"github.com/Microsoft/hcsshim/hcn"

	"github.com/kubewin/kubewin/nodeboot/internal/platform/windows/hcnjson"
)

// hnsAPI passes the requests to HNS through hcsshim's hcn package: each hcnjson value becomes
// the hcn value of the same JSON and back.
type hnsAPI struct{}

// convert re-reads a value as another type of the same JSON (hcnjson ↔ hcn).
func convert[T any](from any) (*T, error) {
	b, err := json.Marshal(from)
	if err != nil {
		return nil, err
	}
	var to T
	if err := json.Unmarshal(b, &to); err != nil {
		return nil, err
	}
	return &to, nil
}

func notFound(err error) error {
	if hcn.IsNotFoundError(err) {
		return errors.Join(ErrNotFound, err)
	}
	return err
}

func (hnsAPI) NetworkByName(name string) (*hcnjson.HostComputeNetwork, error) {
	n, err := hcn.GetNetworkByName(name)
	if err != nil {
		return nil, notFound(err)
	}
	return convert[hcnjson.HostComputeNetwork](n)
}

func (hnsAPI) Networks() ([]hcnjson.HostComputeNetwork, error) {
	nets, err := hcn.ListNetworks()
	if err != nil {
		return nil, err
	}
	out, err := convert[[]hcnjson.HostComputeNetwork](nets)
	if err != nil {
		return nil, err
	}
	return *out, nil
}

func (hnsAPI) NetworkByID(id string) (*hcnjson.HostComputeNetwork, error) {
	n, err := hcn.GetNetworkByID(id)
	if err != nil {
		return nil, notFound(err)
	}
	return convert[hcnjson.HostComputeNetwork](n)
}

func (hnsAPI) CreateNetwork(req *hcnjson.HostComputeNetwork) (*hcnjson.HostComputeNetwork, error) {
	n, err := convert[hcn.HostComputeNetwork](req)
	if err != nil {
		return nil, err
	}
	made, err := n.Create()
	if err != nil {
		return nil, err
	}
	return convert[hcnjson.HostComputeNetwork](made)
}

func (hnsAPI) ManagementIP(networkID string) (string, error) {
	n, err := hcsshim.GetHNSNetworkByID(networkID)
	if err != nil {
		return "", notFound(err)
	}
	return n.ManagementIP, nil
}

func (hnsAPI) DeleteNetwork(id string) error {
	return notFound((&hcn.HostComputeNetwork{Id: id}).Delete())
}

func policyRequest(req hcnjson.PolicyNetworkRequest) (hcn.PolicyNetworkRequest, error) {
	r, err := convert[hcn.PolicyNetworkRequest](req)
	if err != nil {
		return hcn.PolicyNetworkRequest{}, err
	}
	return *r, nil
}

func (hnsAPI) AddNetworkPolicy(networkID string, req hcnjson.PolicyNetworkRequest) error {
	r, err := policyRequest(req)
	if err != nil {
		return err
	}
	return (&hcn.HostComputeNetwork{Id: networkID}).AddPolicy(r)
}

func (hnsAPI) RemoveNetworkPolicy(networkID string, req hcnjson.PolicyNetworkRequest) error {
	r, err := policyRequest(req)
	if err != nil {
		return err
	}
	return (&hcn.HostComputeNetwork{Id: networkID}).RemovePolicy(r)
}

func (hnsAPI) EndpointsOfNetwork(networkID string) ([]hcnjson.HostComputeEndpoint, error) {
	eps, err := hcn.ListEndpointsOfNetwork(networkID)
	if err != nil {
		return nil, notFound(err)
	}
	out, err := convert[[]hcnjson.HostComputeEndpoint](eps)
	if err != nil {
		return nil, err
	}
	return *out, nil
}

func (hnsAPI) EndpointByName(name string) (*hcnjson.HostComputeEndpoint, error) {
	ep, err := hcn.GetEndpointByName(name)
	if err != nil {
		return nil, notFound(err)
	}
	return convert[hcnjson.HostComputeEndpoint](ep)
}

func (hnsAPI) CreateEndpoint(req *hcnjson.HostComputeEndpoint) (*hcnjson.HostComputeEndpoint, error) {
	ep, err := convert[hcn.HostComputeEndpoint](req)
	if err != nil {
		return nil, err
	}
	made, err := ep.Create()
	if err != nil {
		return nil, err
	}
	return convert[hcnjson.HostComputeEndpoint](made)
}

func (hnsAPI) DeleteEndpoint(id string) error {
	return notFound((&hcn.HostComputeEndpoint{Id: id}).Delete())
}

func (hnsAPI) LoadBalancers() ([]hcnjson.HostComputeLoadBalancer, error) {
	lbs, err := hcn.ListLoadBalancers()
	if err != nil {
		return nil, err
	}
	out, err := convert[[]hcnjson.HostComputeLoadBalancer](lbs)
	if err != nil {
		return nil, err
	}
	return *out, nil
}

func (hnsAPI) DeleteLoadBalancer(id string) error {
	return notFound((&hcn.HostComputeLoadBalancer{Id: id}).Delete())
}

// AttachHost makes HNS's HostAttach call for the endpoint, by ID, into compartment 1 (the host's
// default compartment): hcn has no host attach (hcn/hcnendpoint.go offers NamespaceAttach
// only), so Microsoft's own windows-container-networking attaches the gateway endpoint it
// creates through hcn the same way (test/utilities CreateGatewayEp).
func (hnsAPI) AttachHost(endpointID string) error {
	err := (&hcsshim.HNSEndpoint{Id: endpointID}).HostAttach(1)
	if err != nil && strings.Contains(err.Error(), "already attached") {
		return errors.Join(ErrAlreadyAttached, err)
	}
	return err
}
