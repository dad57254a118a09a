package azure

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/arm"
	"github.com/hashicorp/terraform-plugin-log/tflog"

	"github.com/kubewin/kubewin/provider/internal/pool"
)

// How Compute's failures to create machines reach the user: each with what to do about it.

// errorCodeOf is ARM's error code of err (a request's or a long-running operation's), or "".
func errorCodeOf(err error) string {
	var re *azcore.ResponseError
	if errors.As(err, &re) {
		return re.ErrorCode
	}
	return ""
}

// maxPreemptions bounds how often a write that a more recent operation preempted is sent again.
const maxPreemptions = 3

// preemptible runs a long-running write, its request and its wait, and runs it again when
// Compute preempted it: a more recent operation on the resource (another client's, the
// platform's) makes Compute end the running one Canceled with OperationPreempted instead of
// refusing the new one with 409 (sigs.k8s.io/cloud-provider-azure retries it so). Nothing of a
// preempted operation applies, so write reads again what it depends on.
func preemptible(ctx context.Context, what string, write func() error) error {
	for attempt := 1; ; attempt++ {
		err := write()
		if errorCodeOf(err) != "OperationPreempted" || attempt == maxPreemptions || ctx.Err() != nil {
			return err
		}
		tflog.Warn(ctx, "a more recent operation preempted the write; sending it again", map[string]any{"write": what, "attempt": attempt})
	}
}

// provisioningTimedOut reports whether err is Compute giving up on a machine whose guest did not
// report its provisioning complete in time (40 minutes): the machine runs, and "may still finish
// provisioning successfully" (the error's message; Azure/aks-engine#3694,
// https://learn.microsoft.com/troubleshoot/azure/virtual-machines/windows/troubleshoot-deployment-new-vm-windows).
// Whether it serves is its node's join to tell, not the error.
func provisioningTimedOut(err error) bool { return errorCodeOf(err) == "OSProvisioningTimedOut" }

// explainLinkedImage gives ARM's refusal of a write whose image is in a subscription of another
// tenant, for want of that tenant's auxiliary token, what the user does about it: 403
// LinkedAuthorizationFailed, "... however the current tenant '{tenant}' is not authorized to access
// linked subscription '{subscription}'" (Azure/AKS#2040, hashicorp/terraform-provider-azurerm#21346).
// The message names the subscription; ARM is asked for its tenant (tenants.go).
func (c *Client) explainLinkedImage(ctx context.Context, err error, imageID string) error {
	r, perr := arm.ParseResourceID(imageID)
	if errorCodeOf(err) != "LinkedAuthorizationFailed" || !strings.Contains(err.Error(), "not authorized to access linked subscription") || perr != nil {
		return err
	}
	tenant, terr := c.subscriptionTenant(ctx, r.SubscriptionID)
	if terr != nil {
		tflog.Warn(ctx, "could not learn the tenant of the image's subscription", map[string]any{"error": terr.Error()})
	}
	return &pool.ActionError{Summary: "Image in Another Tenant", Err: err,
		Remedy: auxiliaryTenantRemedy(r.SubscriptionID, tenant) + " ARM refused the write: nothing changed. Apply again once the tenant is added."}
}

// explain gives a failure to create machines of m what the user does about it, as a
// pool.ActionError; other errors are returned as they are.
func explain(err error, m Machines, count int) error {
	return explainCreate(err, m.VMSize, m.Location, m.Zones, count, "node_count",
		"the next apply removes the machines that were not allocated and adds them again")
}

// explainCreate is explain for count machines of size vmSize in location and zones; again says
// what the next apply does with what failed.
func explainCreate(err error, vmSize, location string, zones []string, count int, countAttr, again string) error {
	if err == nil {
		return nil
	}
	where := location
	if len(zones) > 0 {
		where += " (zones " + strings.Join(zones, ", ") + ")"
	}
	switch code := errorCodeOf(err); {
	// https://learn.microsoft.com/troubleshoot/azure/virtual-machines/windows/allocation-failure
	case code == "AllocationFailed" || code == "ZonalAllocationFailed" || code == "OverconstrainedAllocationRequest":
		return &pool.ActionError{Summary: "Azure Has No Capacity for the VM Size", Err: err, Remedy: fmt.Sprintf(
			"Azure could not allocate %s machines in %s (%s). Apply again later: %s. If it persists, choose another vm_size, "+
				"other zones or another location (https://aka.ms/allocation-guidance).", vmSize, where, code, again)}
	// https://learn.microsoft.com/azure/quotas/per-vm-quota-requests
	case code == "OperationNotAllowed" && strings.Contains(strings.ToLower(err.Error()), "quota"):
		fewer := ""
		if countAttr != "" {
			fewer = "lower " + countAttr + ", or "
		}
		return &pool.ActionError{Summary: "Azure vCPU Quota Exceeded", Err: err, Remedy: fmt.Sprintf(
			"The subscription's vCPU quota in %s is too small for %d more %s machines (the message above names the quota, its "+
				"limit and the new limit required), and no machine was created. Request a quota increase "+
				"(https://learn.microsoft.com/azure/quotas/per-vm-quota-requests), or %schoose a vm_size of "+
				"another family; then apply again.", location, count, vmSize, fewer)}
	}
	return err
}
