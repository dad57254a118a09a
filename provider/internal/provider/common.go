package provider

import (
	"context"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/terraform-plugin-framework-timeouts/resource/timeouts"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types/basetypes"

	"github.com/kubewin/kubewin/internal/ipam"
)

var pathLocalStateDir = path.Root("local").AtName("state_dir")

// What has been verified of what a page describes, and how: every page that describes the
// azure backend or Windows behaviour ends with one of these lines (README.md's "Real, simulated,
// planned" says it at length).
const (
	verifiedWindows = "the Windows node agent (nodeboot) only on a simulated Windows machine, never on Windows"
	verifiedAzure   = "\n\n**Verified so far:** the `azure` backend only against kubewin's ARM test server on 127.0.0.1 " +
		"(`internal/testkit/armtest`), never against Azure itself; " + verifiedWindows + "."
	verifiedWindowsLine = "\n\n**Verified so far:** " + verifiedWindows + "; images have been baked only onto simulated Windows machines."
	verifiedServers     = "\n\n**Verified so far:** over real OpenSSH on 127.0.0.1 against a simulated Windows machine, and over WinRM " +
		"against a test server that answers as Windows would; its PowerShell scripts and nodeboot's Windows side have never run on Windows."
)

// timeoutsAttribute is the timeouts attribute of a resource whose create, update and delete
// wait at most these long by default (0: the operation takes no timeout).
func timeoutsAttribute(ctx context.Context, what string, create, update, del time.Duration) schema.Attribute {
	desc := func(op string, d time.Duration) string {
		return fmt.Sprintf("How long %s may take, as a duration (`30s`, `45m`, `2h`). Default `%s`.", op, strings.TrimSuffix(d.String(), "0s"))
	}
	a, ok := timeouts.Attributes(ctx, timeouts.Opts{
		Create: create > 0, Update: update > 0, Delete: del > 0,
		CreateDescription: desc("creating", create), UpdateDescription: desc("an update", update), DeleteDescription: desc("destroying", del),
	}).(schema.SingleNestedAttribute)
	if !ok {
		panic("terraform-plugin-framework-timeouts: the resource timeouts attribute is no longer a schema.SingleNestedAttribute")
	}
	a.Description = "Longest waits of the operations, " + what + "."
	return a
}

// noteReplacements ends the description of every string attribute that replaces the resource
// when it changes with azurerm's "Changing this forces a new resource to be created.", so that
// the page says what the plan does.
func noteReplacements(ctx context.Context, s *schema.Schema) {
	replace := stringplanmodifier.RequiresReplace().Description(ctx)
	note := func(attrs map[string]schema.Attribute) {
		for name, a := range attrs {
			sa, ok := a.(schema.StringAttribute)
			if ok && slices.ContainsFunc(sa.PlanModifiers, func(m planmodifier.String) bool { return m.Description(ctx) == replace }) {
				sa.Description += " Changing this forces a new resource to be created."
				attrs[name] = sa
			}
		}
	}
	note(s.Attributes)
	for _, b := range s.Blocks {
		if nb, ok := b.(schema.SingleNestedBlock); ok {
			note(nb.Attributes)
		}
	}
}

// requiredInBlock begins the description of an argument a block needs: the framework would
// require a Required one of a block that is absent too, so it is Optional and checked in code.
const requiredInBlock = "**Required** when the block is present. "

// envRemoteRun is set in every Terraform Cloud (HCP Terraform) run.
const envRemoteRun = "TFC_RUN_ID"

// checkNotRemote refuses the local backend in a Terraform Cloud run: its clusters and machines
// are processes on the machine that runs Terraform, and nothing of a remote run's machine
// survives the run.
func checkNotRemote(at path.Path) diag.Diagnostics {
	var diags diag.Diagnostics
	if os.Getenv(envRemoteRun) == "" {
		return diags
	}
	diags.AddAttributeError(at, "The Local Backend Cannot Run in Terraform Cloud",
		"This run is a Terraform Cloud run (TFC_RUN_ID is set). The local backend's clusters and simulated machines are processes on the machine "+
			"that runs Terraform, and a remote run's machine is gone when the run ends. Use the azure backend here, or run the local backend "+
			"with a local or agent-less workspace (execution mode local).")
	return diags
}

// configuredData returns the provider's data handed to a resource, or nil before the provider
// is configured.
func configuredData(pd any, diags *diag.Diagnostics) *providerData {
	if pd == nil {
		return nil
	}
	d, ok := pd.(*providerData)
	if !ok {
		diags.AddError("Unexpected Provider Data", fmt.Sprintf("Expected *providerData, got %T. Please report this issue to the provider developers.", pd))
		return nil
	}
	return d
}

// cidrValidator accepts canonical IPv4 CIDRs.
type cidrValidator struct{}

func (cidrValidator) Description(context.Context) string {
	return "must be an IPv4 CIDR such as 10.244.0.0/16, without host bits"
}

func (v cidrValidator) MarkdownDescription(ctx context.Context) string { return v.Description(ctx) }

func (cidrValidator) ValidateString(_ context.Context, req validator.StringRequest, resp *validator.StringResponse) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() {
		return
	}
	if _, err := ipam.ParsePrefix(req.ConfigValue.ValueString()); err != nil {
		resp.Diagnostics.AddAttributeError(req.Path, "Invalid CIDR", fmt.Sprintf("%s: %s.", req.Path, err))
	}
}

// ipValidator accepts IPv4 addresses.
type ipValidator struct{}

func (ipValidator) Description(context.Context) string { return "must be an IPv4 address" }

func (v ipValidator) MarkdownDescription(ctx context.Context) string { return v.Description(ctx) }

func (ipValidator) ValidateString(_ context.Context, req validator.StringRequest, resp *validator.StringResponse) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() {
		return
	}
	if _, err := ipam.ParseAddr(req.ConfigValue.ValueString()); err != nil {
		resp.Diagnostics.AddAttributeError(req.Path, "Invalid IP Address", fmt.Sprintf("%s: %s.", req.Path, err))
	}
}

// durationValidator accepts Go durations such as 30m or 1h30m.
type durationValidator struct{}

func (durationValidator) Description(context.Context) string {
	return "must be a duration such as 30s, 5m or 1h30m"
}

func (v durationValidator) MarkdownDescription(ctx context.Context) string { return v.Description(ctx) }

func (durationValidator) ValidateString(_ context.Context, req validator.StringRequest, resp *validator.StringResponse) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() {
		return
	}
	if d, err := time.ParseDuration(req.ConfigValue.ValueString()); err != nil || d <= 0 {
		resp.Diagnostics.AddAttributeError(req.Path, "Invalid Duration", fmt.Sprintf("%s: %q must be a positive duration such as 30s, 5m or 1h30m.",
			req.Path, req.ConfigValue.ValueString()))
	}
}

var objectAsOptions = basetypes.ObjectAsOptions{}

// attributes merges schema attributes.
func attributes(sets ...map[string]schema.Attribute) map[string]schema.Attribute {
	out := map[string]schema.Attribute{}
	for _, s := range sets {
		maps.Copy(out, s)
	}
	return out
}

// checkOneBackend is the rule of every resource with backend blocks, local and azure: exactly
// one is set. missing is what the resource says when none is; blocks names the two in the
// order the resource's message gives them.
// oneBackend returns the one backend block that is set, as the resource's backend interface B;
// nil when none or both are (checkOneBackend reports those). Every block type implements its
// resource's B: the resources' tests create each.
func oneBackend[B, L, A any](local *L, azure *A) B {
	var b B
	switch {
	case (local == nil) == (azure == nil):
	case local == nil:
		b, _ = any(azure).(B)
	default:
		b, _ = any(local).(B)
	}
	return b
}

func checkOneBackend[L, A any](local *L, azure *A, missing, blocks string) diag.Diagnostics {
	var diags diag.Diagnostics
	switch {
	case local == nil && azure == nil:
		diags.AddAttributeError(path.Root("local"), "Missing Backend", missing)
	case local != nil && azure != nil:
		diags.AddAttributeError(path.Root("azure"), "Conflicting Backends", "Set one backend block, "+blocks+", not both.")
	}
	return diags
}
