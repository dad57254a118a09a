package provider

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/kubewin/kubewin/provider/internal/azure/azureacc"
)

// The real-Azure track, shown without Azure: the environment a maintainer sets for it
// (ARM_SUBSCRIPTION_ID, ARM_TENANT_ID, ARM_CLIENT_ID, ARM_CLIENT_SECRET, ARM_TEST_LOCATION), with
// the test server's endpoints given as a custom cloud (ARM_METADATA_HOSTNAME), makes
// azureacc.FromEnv choose a real target, and the pod route suite runs through it: its resource
// group is created through ARM, tagged with the run, holds what the provider wrote, and is
// deleted with it at the end.
func TestAccAzureTargetFromEnvironment(t *testing.T) {
	testServerOnly(t)
	t.Setenv(azureacc.EnvLocation, armServer.Location())
	t.Setenv(azureacc.EnvRun, "fake-env")
	tg, err := azureacc.FromEnv(context.Background())
	if err != nil || tg == nil || !tg.Real {
		t.Fatalf("target %+v, %v: the environment names a subscription", tg, err)
	}
	t.Run("PodRoute", func(t *testing.T) { testAccPodRouteAzure(t, tg) })

	group := azureacc.GroupPrefix + "fake-env-1"
	var created, routes, deleted bool
	for _, r := range armServer.Requests() {
		path := strings.ToLower(r.Path)
		switch {
		case r.Method == "PUT" && strings.HasSuffix(path, "/resourcegroups/"+group) && r.Status < 300:
			var body struct{ Tags map[string]string }
			created = json.Unmarshal(r.Body, &body) == nil && body.Tags[azureacc.TagRun] == "fake-env" && body.Tags[azureacc.TagCreated] != ""
		case r.Method == "PUT" && r.Status < 300 && strings.HasSuffix(path, "/resourcegroups/"+group+"/providers/microsoft.network/routetables/pods"):
			var body struct{ Properties struct{ Routes []any } }
			routes = routes || json.Unmarshal(r.Body, &body) == nil && len(body.Properties.Routes) > 0
		case r.Method == "DELETE" && strings.HasSuffix(path, "/resourcegroups/"+group) && r.Status == 202:
			deleted = true
		}
	}
	if !created || !routes || !deleted || armServer.HasResourceGroup(group) {
		t.Errorf("group %s: created with the run's tags %v, routes written in it %v, deleted %v, still there %v",
			group, created, routes, deleted, armServer.HasResourceGroup(group))
	}
}

// Without ARM_SUBSCRIPTION_ID the environment names no target: the suites use the test server.
// With it and no region, the error says what to set.
func TestAzureTargetNeedsLocation(t *testing.T) {
	t.Setenv("ARM_SUBSCRIPTION_ID", "")
	if tg, err := azureacc.FromEnv(context.Background()); tg != nil || err != nil {
		t.Errorf("no subscription: %v, %v", tg, err)
	}
	t.Setenv("ARM_SUBSCRIPTION_ID", "00000000-0000-0000-0000-000000000000")
	t.Setenv(azureacc.EnvLocation, "")
	if _, err := azureacc.FromEnv(context.Background()); err == nil || !strings.Contains(err.Error(), "set ARM_TEST_LOCATION") {
		t.Errorf("no location: %v", err)
	}
}

// With a subscription in the environment every azure suite of this package either runs against
// it or skips, saying it needs the test server; none reaches for the test server. Shown by
// running this package's azure tests again in a child process whose environment names the test
// server's subscription as a real one (the route suites, which run there, are
// TestAccAzureTargetFromEnvironment's).
func TestAccAzureSuitesOnSubscription(t *testing.T) {
	t.Parallel()
	acceptance(t)
	testServerOnly(t)
	timeout := 10 * time.Minute
	if d, ok := t.Deadline(); ok {
		timeout = time.Until(d) - 30*time.Second
	}
	cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run", "zure",
		"-test.skip", "^TestAccPodRoute_azure|^TestAccAzureTargetFromEnvironment$|^TestAccAzureSuitesOnSubscription$",
		"-test.v", "-test.count=1", "-test.timeout="+timeout.String())
	// The Windows image a maintainer would name, published here for the child.
	images := fmt.Sprintf("kubewin-suite-images-%d", azureSeq.Add(1))
	armServer.AddResourceGroup(images)
	cmd.Env = append(append(os.Environ(), armServer.Env()...),
		azureacc.EnvLocation+"="+armServer.Location(), azureacc.EnvRun+"=suite-child",
		azureacc.EnvWindowsImage+"="+seedWindowsImage(t, t.TempDir(), images))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the azure suites with a subscription set: %v\n%s", err, out)
	}
	// Each skipped test says why, in its lines from "=== RUN" to "--- SKIP".
	const why = "the azure suites target real Azure because ARM_SUBSCRIPTION_ID is set"
	skip := regexp.MustCompile(`(?m)^--- SKIP: (\S+)`)
	var skipped []string
	for _, run := range strings.Split(string(out), "=== RUN")[1:] {
		if m := skip.FindStringSubmatch(run); m != nil {
			skipped = append(skipped, m[1])
			if !strings.Contains(run, why) {
				t.Errorf("%s skipped without saying it needs the test server:\n%s", m[1], run)
			}
		}
	}
	// The cluster suite runs on both targets: here it made, repaired and destroyed a cluster,
	// and a Windows pool joined it, through the real target's code path.
	if !regexp.MustCompile(`(?m)^--- PASS: TestAccClusterAzure \(`).Match(out) {
		t.Errorf("TestAccClusterAzure did not pass with a subscription set:\n%s", out)
	}
	pool := false
	for _, r := range armServer.Requests() {
		pool = pool || r.Method == http.MethodPut && r.Status < 300 && r.ResourceType == "Microsoft.Compute/virtualMachineScaleSets" &&
			strings.Contains(strings.ToLower(string(r.Body)), strings.ToLower(armServer.ResourceGroupID(images)))
	}
	if !pool {
		t.Errorf("no scale set was made of the Windows image in %s: the cluster suite's pool step did not run", images)
	}
	ran := regexp.MustCompile(`(?m)^--- PASS: `).FindAllIndex(out, -1)
	if len(skipped) == 0 {
		t.Errorf("no azure test skipped:\n%s", out)
	}
	t.Logf("with a subscription set: %d azure tests skipped (they need the test server), %d ran", len(skipped), len(ran))
}
