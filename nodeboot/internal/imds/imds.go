// Package imds reads the Azure Instance Metadata Service, the REST API a VM reaches at
// 169.254.169.254 and at no other address
// (https://learn.microsoft.com/en-us/azure/virtual-machines/instance-metadata-service).
package imds

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"
)

// APIVersion is the IMDS API version nodeboot asks for: compute.osProfile is in every version
// from 2020-07-15.
const APIVersion = "2021-02-01"

// Client reads one machine's instance metadata.
type Client struct {
	// Endpoint is the service's base URL, http://169.254.169.254 on Azure.
	Endpoint string
	// HTTP sends the requests. Default: a client that goes to the service directly, as the
	// docs ask ("Have your HTTP clients bypass web proxies within the VM when querying IMDS").
	HTTP *http.Client
}

// Instance is what nodeboot reads of the instance metadata (/metadata/instance).
type Instance struct {
	Compute struct {
		// Name is the VM's resource name (a scale-set instance's is <scale set>_<instance ID>).
		Name      string `json:"name"`
		OSProfile struct {
			// ComputerName is the computer name Azure gave the machine (osProfile.computerName,
			// for a scale-set instance its computerNamePrefix and a suffix).
			ComputerName string `json:"computerName"`
		} `json:"osProfile"`
	} `json:"compute"`
}

// StatusError is an answer other than 200.
type StatusError struct {
	Code int
	Body string
}

func (e *StatusError) Error() string {
	return fmt.Sprintf("instance metadata service answered %d: %s", e.Code, e.Body)
}

// Transient reports whether the request is worth repeating: IMDS's documented retryable
// answers are 410 (during the VM's first boot), 429 and 5xx (the "Errors and debugging" table of
// the IMDS docs).
func (e *StatusError) Transient() bool {
	return e.Code == http.StatusGone || e.Code == http.StatusTooManyRequests || e.Code >= 500
}

var direct = &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{Proxy: nil}}

// Instance returns the instance metadata. IMDS answers only requests with the header
// "Metadata: true" and an api-version.
func (c Client) Instance(ctx context.Context) (Instance, error) {
	var in Instance
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.Endpoint+"/metadata/instance?api-version="+APIVersion, nil)
	if err != nil {
		return in, err
	}
	req.Header.Set("Metadata", "true")
	hc := c.HTTP
	if hc == nil {
		hc = direct
	}
	resp, err := hc.Do(req)
	if err != nil {
		return in, err
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return in, err
	}
	if resp.StatusCode != http.StatusOK {
		return in, &StatusError{Code: resp.StatusCode, Body: string(body)}
	}
	if err := json.Unmarshal(body, &in); err != nil {
		return in, fmt.Errorf("instance metadata: %w", err)
	}
	return in, nil
}
