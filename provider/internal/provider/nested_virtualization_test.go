package provider

import (
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/types"
)

// A pool of an image baked with Hyper-V isolation: a VM size Azure documents without nested
// virtualization fails the plan at azure.vm_size; one kubewin has no record of warns; a
// documented one passes.
func TestCheckNestedVirtualization(t *testing.T) {
	for _, tc := range []struct {
		size     types.String
		severity diag.Severity // 0: no diagnostic
		want     string
	}{
		{types.StringValue("Standard_D4s_v5"), 0, ""},
		{types.StringValue("Standard_D4s_v3"), 0, ""},
		{types.StringValue("Standard_DS2_v2"), diag.SeverityError, "Azure documents none for Standard_DS2_v2 (series dsv2)"},
		{types.StringValue("Standard_B2s_v2"), diag.SeverityError, "such as Standard_D4s_v5 or Standard_D4as_v5"},
		{types.StringValue("Standard_NC6"), diag.SeverityWarning, "kubewin has no record of whether Standard_NC6 supports it"},
		{types.StringUnknown(), 0, ""},
	} {
		diags := checkNestedVirtualization(tc.size)
		if tc.severity == 0 {
			if len(diags) != 0 {
				t.Errorf("%s: %v", tc.size, diags)
			}
			continue
		}
		if len(diags) != 1 || diags[0].Severity() != tc.severity || !strings.Contains(diags[0].Detail(), tc.want) {
			t.Errorf("%s: %v, want one of severity %v saying %q", tc.size, diags, tc.severity, tc.want)
			continue
		}
		if p, ok := diags[0].(diag.DiagnosticWithPath); !ok || p.Path().String() != "azure.vm_size" {
			t.Errorf("%s: diagnostic not at azure.vm_size: %v", tc.size, diags[0])
		}
	}
}
