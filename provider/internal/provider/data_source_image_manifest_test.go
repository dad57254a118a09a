package provider

import (
	"fmt"
	"regexp"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"
)

func TestAccImageManifestDataSource(t *testing.T) {
	t.Parallel()
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{{
			Config: `data "kubewin_image_manifest" "test" { path = "testdata/imagemanifest.json" }`,
			ConfigStateChecks: []statecheck.StateCheck{
				statecheck.ExpectKnownValue("data.kubewin_image_manifest.test", tfjsonpath.New("windows_build"), knownvalue.Int64Exact(20348)),
				statecheck.ExpectKnownValue("data.kubewin_image_manifest.test", tfjsonpath.New("windows_release"), knownvalue.StringExact("2022")),
				statecheck.ExpectKnownValue("data.kubewin_image_manifest.test", tfjsonpath.New("kubernetes_version"), knownvalue.StringExact("v1.36.2")),
				statecheck.ExpectKnownValue("data.kubewin_image_manifest.test", tfjsonpath.New("runtime"), knownvalue.StringExact("containerd")),
				statecheck.ExpectKnownValue("data.kubewin_image_manifest.test", tfjsonpath.New("cri_dockerd_version"), knownvalue.Null()),
				statecheck.ExpectKnownValue("data.kubewin_image_manifest.test", tfjsonpath.New("pause_image"),
					knownvalue.StringExact("registry.k8s.io/pause:3.10")),
				statecheck.ExpectKnownValue("data.kubewin_image_manifest.test", tfjsonpath.New("id"),
					knownvalue.StringRegexp(regexp.MustCompile(`^[0-9a-f]{64}$`))),
				statecheck.ExpectKnownValue("data.kubewin_image_manifest.test", tfjsonpath.New("files"), knownvalue.ListExact([]knownvalue.Check{
					knownvalue.ObjectExact(map[string]knownvalue.Check{
						"path":   knownvalue.StringExact("bin/kubelet.exe"),
						"sha256": knownvalue.StringExact("0f5a8ab3b2e9a9c3b1f36a24f2d0c6f3f0c1d1e0e2b3a4c5d6e7f8091a2b3c4d"),
						"size":   knownvalue.Int64Exact(125829120),
					}),
					knownvalue.ObjectPartial(map[string]knownvalue.Check{"path": knownvalue.StringExact("bin/kube-proxy.exe")}),
					knownvalue.ObjectPartial(map[string]knownvalue.Check{"path": knownvalue.StringExact("ProgramData/kubewin/images/app.tar")}),
				})),
				statecheck.ExpectKnownValue("data.kubewin_image_manifest.test", tfjsonpath.New("workload_images"),
					knownvalue.ListExact([]knownvalue.Check{knownvalue.ObjectExact(map[string]knownvalue.Check{
						"reference":   knownvalue.StringExact("mcr.microsoft.com/windows/servercore:ltsc2022"),
						"digest":      knownvalue.StringExact("sha256:3f5a8ab3b2e9a9c3b1f36a24f2d0c6f3f0c1d1e0e2b3a4c5d6e7f8091a2b3c4d"),
						"os_version":  knownvalue.StringExact("10.0.20348.2849"),
						"size":        knownvalue.Int64Exact(2040100000),
						"hyperv_only": knownvalue.Bool(false),
					})})),
			},
		}},
	})
}

// The manifest of an image with Hyper-V isolation, as its bake installed it (the workload images'
// archives deleted after their import), says which workload image runs Hyper-V isolated only:
// the one of an earlier build than the image's.
func TestAccImageManifestDataSource_hyperVOnly(t *testing.T) {
	t.Parallel()
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{{
			Config: `data "kubewin_image_manifest" "test" { path = "testdata/imagemanifest-hyperv.json" }`,
			ConfigStateChecks: []statecheck.StateCheck{
				statecheck.ExpectKnownValue("data.kubewin_image_manifest.test", tfjsonpath.New("workload_images"), knownvalue.ListExact([]knownvalue.Check{
					knownvalue.ObjectPartial(map[string]knownvalue.Check{"os_version": knownvalue.StringExact("10.0.20348.2849"),
						"hyperv_only": knownvalue.Bool(true)}),
					knownvalue.ObjectPartial(map[string]knownvalue.Check{"os_version": knownvalue.StringExact("10.0.26100.2314"),
						"hyperv_only": knownvalue.Bool(false)}),
				})),
			},
		}},
	})
}

func TestAccImageManifestDataSource_content(t *testing.T) {
	t.Parallel()
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{{
			Config: `data "kubewin_image_manifest" "test" { content = file("testdata/imagemanifest.json") }`,
			ConfigStateChecks: []statecheck.StateCheck{
				statecheck.ExpectKnownValue("data.kubewin_image_manifest.test", tfjsonpath.New("nodeboot_version"), knownvalue.StringExact("0.1.0")),
			},
		}},
	})
}

func TestAccImageManifestDataSource_errors(t *testing.T) {
	t.Parallel()
	invalid := `{"apiVersion":"kubewin.io/v1alpha1","kind":"ImageManifest","windowsBuild":14393,"kubernetesVersion":"v1.30.0",` +
		`"runtime":{"name":"docker","version":"24.0.7"},"pauseImage":{"reference":"registry.k8s.io/pause:3.10","digest":"sha256:x"},` +
		`"nodebootVersion":"0.1.0","files":[{"path":"../x","sha256":"00","size":1}],` +
		`"workloadImages":[{"reference":"example.com/app:1","digest":"sha256:x","osVersion":"10.0.19041.1","size":1,"archive":"app.tar"}]}`
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{
			{
				Config: fmt.Sprintf(`data "kubewin_image_manifest" "test" { content = %q }`, invalid),
				ExpectError: regexp.MustCompile(`(?s)Invalid Image Manifest.*windowsBuild:.*"14393".*kubernetesVersion.*` +
					`criDockerdVersion:.*pauseImage.digest.*workloadImages\[0\].digest.*workloadImages\[0\].osVersion:\s+Invalid\s+value:\s+` +
					`"10.0.19041.1":.*Windows\s+build\s+19041,\s+which\s+kubewin\s+nodes\s+do\s+not\s+run.*workloadImages\[0\].archive.*` +
					`files\[0\].path`),
			},
			{
				Config:      `data "kubewin_image_manifest" "test" { path = "testdata/missing.json" }`,
				ExpectError: regexp.MustCompile(`Cannot Read Image Manifest`),
			},
			{
				Config:      `data "kubewin_image_manifest" "test" {}`,
				ExpectError: regexp.MustCompile(`(?s)Missing Attribute Configuration.*Exactly one of these attributes must be configured: \[path,content\]`),
			},
			{
				Config: `data "kubewin_image_manifest" "test" { content = "{\"apiVersion\":\"kubewin.io/v1alpha1\",\"kind\":\"ImageManifest\",` +
					`\"extra\":1}" }`,
				ExpectError: regexp.MustCompile(`unknown field\s+"extra"`),
			},
		},
	})
}
