package provider

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A published api model read through file(), its administrator password included, converts;
// the password, dropped with a warning, reaches neither the state, the saved plan (as JSON)
// nor a TF_LOG=TRACE log. Terraform stores a function's result, never its arguments.
func TestAccACSAPIModelSecretsStayOut(t *testing.T) {
	t.Parallel()
	acceptance(t)
	const password = "replacepassword1234$" // aks-engine's examples/windows/kubernetes.json, as published
	dir := t.TempDir()
	copyFile(t, "../acsmodel/testdata/aks-engine/kubernetes.json", filepath.Join(dir, "kubernetes.json"))
	if data, err := os.ReadFile(filepath.Join(dir, "kubernetes.json")); err != nil || !strings.Contains(string(data), password) {
		t.Fatalf("the test model holds no password (%v)", err)
	}
	c := newCLI(t, dir, `
locals {
  acs = provider::kubewin::acs_apimodel(file("${path.module}/kubernetes.json"))
}

resource "terraform_data" "model" {
  input = local.acs
}

output "warnings" {
  value = local.acs.warnings
}
`)
	trace := filepath.Join(dir, "trace.log")
	c.env = append(c.env, "TF_LOG=TRACE", "TF_LOG_PATH="+trace)
	c.run(t, "plan", "-input=false", "-no-color", "-out=tfplan")
	_, plan, err := c.try("show", "-json", "tfplan")
	if err != nil {
		t.Fatal(plan)
	}
	c.run(t, "apply", "-input=false", "-no-color", "tfplan")
	_, warnings, err := c.try("output", "-no-color", "warnings")
	if err != nil || !strings.Contains(warnings, "properties.windowsProfile.adminPassword: dropped") || !strings.Contains(warnings,
		"admin_password_wo") {
		t.Errorf("warnings output %s (%v): want the dropped password named, with the write-only attribute", warnings, err)
	}
	state, err := os.ReadFile(filepath.Join(dir, "terraform.tfstate"))
	if err != nil {
		t.Fatal(err)
	}
	log, err := os.ReadFile(trace)
	if err != nil || !strings.Contains(string(log), "acs_apimodel") {
		t.Fatalf("the TRACE log has no trace of the function call (%v)", err)
	}
	if !strings.Contains(plan, "windowspool2") || !strings.Contains(string(state), "windowspool2") {
		t.Error("the plan or the state lacks the converted model")
	}
	for what, text := range map[string]string{"the state": string(state), "the plan": plan, "the TRACE log": string(log)} {
		if strings.Contains(text, password) {
			t.Errorf("%s holds the model's administrator password", what)
		}
	}
}
