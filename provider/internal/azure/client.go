// Package azure is the provider's azure backend: a node pool is one Uniform virtual machine
// scale set (pool.Compute), pod routes are routes of an Azure route table, and credentials are
// read as the azurerm provider reads them (Terraform Cloud's dynamic credentials included).
// Every write is one ARM request whatever the number of machines; long-running operations are
// polled to the end; throttling (429, honouring Retry-After), server errors and
// AnotherOperationInProgress conflicts are retried with back-off.
package azure

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/arm"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/authorization/armauthorization/v2"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v6"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/msi/armmsi"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v6"

	"github.com/kubewin/kubewin/internal/version"
)

// Client is an authenticated connection to Azure Resource Manager for one subscription.
type Client struct {
	SubscriptionID string
	http           *http.Client
	cred           azcore.TokenCredential
	armOptions     *arm.ClientOptions
	compute        *armcompute.ClientFactory
	network        *armnetwork.ClientFactory
	msi            *armmsi.ClientFactory
	authorization  *armauthorization.ClientFactory
	// providerCloud is the cloud as the Azure cloud provider's configuration names it.
	providerCloud ProviderCloud
	// poll is how often long-running operations are polled when ARM gives no Retry-After.
	poll time.Duration
	// dial connects to clusters' API servers; nil: directly. Tests reach an internal load
	// balancer's frontend through the ARM test server's stand-in for it.
	dial func(ctx context.Context, network, address string) (net.Conn, error)
}

// New connects to Azure with the configuration: it resolves the cloud (reading the metadata
// document of a custom cloud) and builds the credential, without calling ARM yet.
func New(ctx context.Context, c Config) (*Client, error) {
	return newClient(ctx, c, &http.Client{Timeout: 2 * time.Minute})
}

// newClient is New over an HTTP client.
func newClient(ctx context.Context, c Config, httpClient *http.Client) (*Client, error) {
	if c.SubscriptionID == "" {
		return nil, fmt.Errorf("subscription_id is not set (nor ARM_SUBSCRIPTION_ID)")
	}
	cl, providerCloud, err := c.resolveCloud(ctx, httpClient)
	if err != nil {
		return nil, err
	}
	opts := azcore.ClientOptions{
		Cloud:           cl,
		Transport:       httpClient,
		Retry:           retryOptions,
		PerCallPolicies: []policy.Policy{longRetryAfter{}},
		Telemetry:       policy.TelemetryOptions{ApplicationID: "kubewin/" + version.Version},
	}
	cred, err := c.Credential(opts, c.MetadataHost != "")
	if err != nil {
		return nil, err
	}
	armOpts := &arm.ClientOptions{ClientOptions: opts, AuxiliaryTenants: c.AuxiliaryTenantIDs}
	compute, err := armcompute.NewClientFactory(c.SubscriptionID, cred, armOpts)
	if err != nil {
		return nil, err
	}
	network, err := armnetwork.NewClientFactory(c.SubscriptionID, cred, armOpts)
	if err != nil {
		return nil, err
	}
	msi, err := armmsi.NewClientFactory(c.SubscriptionID, cred, armOpts)
	if err != nil {
		return nil, err
	}
	authorization, err := armauthorization.NewClientFactory(c.SubscriptionID, cred, armOpts)
	if err != nil {
		return nil, err
	}
	return &Client{SubscriptionID: c.SubscriptionID, http: httpClient, cred: cred, armOptions: armOpts, compute: compute, network: network,
		msi: msi, authorization: authorization, providerCloud: providerCloud, poll: 10 * time.Second}, nil
}

// retryOptions retry what ARM says to retry: throttling (429, after its Retry-After), server
// errors and timeouts, conflicts with another operation in progress on the same resource
// (409 AnotherOperationInProgress), which ARM resolves once that operation ends, and a network
// interface still reserved for a VM deleted less than 180 s ago (400 NicReservedForAnotherVm,
// "retry after 180 seconds"; the back-off's delays add up to several minutes, more than that),
// and a role assignment to a principal Microsoft Entra ID has not replicated yet (400
// PrincipalNotFound: "wait a few minutes and retry",
// https://learn.microsoft.com/azure/role-based-access-control/troubleshooting#symptom---assigning-a-role-to-a-new-principal-sometimes-fails).
var retryOptions = policy.RetryOptions{
	MaxRetries:    8,
	RetryDelay:    2 * time.Second,
	MaxRetryDelay: 2 * time.Minute,
	ShouldRetry: func(resp *http.Response, err error) bool {
		if err != nil {
			return true // connection resets, timeouts
		}
		if slices.Contains(retriedStatus, resp.StatusCode) {
			return true
		}
		switch resp.StatusCode {
		case http.StatusConflict:
			return errorCode(resp) == "AnotherOperationInProgress"
		case http.StatusBadRequest:
			code := errorCode(resp)
			return code == "NicReservedForAnotherVm" || code == "PrincipalNotFound"
		}
		return false
	},
}

// actionRetryOptions are retryOptions for a POST action that must not run twice (deleteInstances):
// what was refused before it ran (throttling, a conflict with another operation) is sent again, and
// a connection error, timeout or server error — after which the action may have run — is not: the
// caller checks what it did (answerLost).
var actionRetryOptions = func() policy.RetryOptions {
	o := retryOptions
	o.ShouldRetry = func(resp *http.Response, err error) bool {
		return err == nil && (resp.StatusCode == http.StatusTooManyRequests ||
			resp.StatusCode == http.StatusConflict && errorCode(resp) == "AnotherOperationInProgress")
	}
	return o
}()

// answerLost reports whether err leaves unknown whether the request took effect: no answer (a
// connection error or timeout) or a server error.
func answerLost(err error) bool {
	var re *azcore.ResponseError
	if errors.As(err, &re) {
		return re.StatusCode >= http.StatusInternalServerError
	}
	return err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded)
}

// longRetryAfter waits out a throttling answer whose Retry-After is longer than the retry policy
// waits (azcore gives up at once past MaxRetryDelay) when the call's deadline — the apply's
// timeout — leaves time for it, and tries again; otherwise the 429 is the call's error at once.
// Compute answers a spent budget with the rest of its window, minutes and up to 20 minutes in the
// documented example
// (https://learn.microsoft.com/troubleshoot/azure/virtual-machines/troubleshooting-throttling-errors).
type longRetryAfter struct{}

func (longRetryAfter) Do(req *policy.Request) (*http.Response, error) {
	ctx := req.Raw().Context()
	for {
		resp, err := req.Clone(ctx).Next()
		if err != nil || resp.StatusCode != http.StatusTooManyRequests {
			return resp, err
		}
		delay := retryAfter(resp)
		if deadline, ok := ctx.Deadline(); delay <= retryOptions.MaxRetryDelay || ok && time.Until(deadline) < delay {
			return resp, nil
		}
		runtime.Drain(resp)
		select {
		case <-time.After(delay):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		if err := req.RewindBody(); err != nil {
			return nil, err
		}
	}
}

// retryAfter reads an answer's retry-after-ms or Retry-After (seconds), 0 when it has none.
func retryAfter(resp *http.Response) time.Duration {
	if ms, err := strconv.Atoi(resp.Header.Get("retry-after-ms")); err == nil {
		return time.Duration(ms) * time.Millisecond
	}
	if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil {
		return time.Duration(s) * time.Second
	}
	return 0
}

var retriedStatus = []int{http.StatusRequestTimeout, http.StatusTooManyRequests, http.StatusInternalServerError,
	http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout}

// errorCode reads ARM's error code from the header or the body, leaving the body readable.
func errorCode(resp *http.Response) string {
	if c := resp.Header.Get("x-ms-error-code"); c != "" {
		return c
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	_ = resp.Body.Close()
	resp.Body = io.NopCloser(bytes.NewReader(body))
	if err != nil {
		return ""
	}
	var e struct {
		Error struct {
			Code string `json:"code"`
		} `json:"error"`
	}
	_ = json.Unmarshal(body, &e)
	return e.Error.Code
}

// wait polls a long-running operation to its end.
func wait[T any](ctx context.Context, c *Client, p *runtime.Poller[T], err error) (T, error) {
	var zero T
	if err != nil {
		return zero, err
	}
	return p.PollUntilDone(ctx, &runtime.PollUntilDoneOptions{Frequency: c.poll})
}

// ARM returns the client's credential and ARM client options, for SDK clients of resource
// providers the backend does not use (the acceptance tests' resource groups).
func (c *Client) ARM() (azcore.TokenCredential, *arm.ClientOptions) { return c.cred, c.armOptions }

// notFound reports whether err is ARM's 404.
func notFound(err error) bool {
	var re *azcore.ResponseError
	return errors.As(err, &re) && re.StatusCode == http.StatusNotFound
}
