package provider

import (
	"context"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"
)

// A Windows administrator password Azure would refuse fails the plan, naming the attribute and
// never the value.
func TestWindowsPasswordValidator(t *testing.T) {
	p := path.Root("azure").AtName("admin_password_wo")
	for pw, want := range map[string]string{
		"Correct-Horse-42":       "",
		"correcthorsebattery42!": "",
		"correcthorsebattery42":  "has 2 of the 4 kinds",
		"CORRECTHORSEBATTERY":    "has 1 of the 4 kinds",
		"P@ssw0rd":               "common passwords",
		"Correct\tHorse42":       "control character",
	} {
		var resp validator.StringResponse
		windowsPasswordValidator{}.ValidateString(context.Background(), validator.StringRequest{Path: p, ConfigValue: types.StringValue(pw)}, &resp)
		got := ""
		for _, d := range resp.Diagnostics.Errors() {
			got = d.Detail()
		}
		if (want == "") != (got == "") || !strings.Contains(got, want) {
			t.Errorf("password %q: %q, want an error containing %q", pw, got, want)
		}
		if got != "" && (!strings.Contains(got, "admin_password_wo") || strings.Contains(got, pw)) {
			t.Errorf("password %q: detail %q must name the attribute and not the value", pw, got)
		}
	}
}
