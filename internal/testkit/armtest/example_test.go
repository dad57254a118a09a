package armtest_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"time"

	"github.com/kubewin/kubewin/internal/testkit/armtest"
)

// A provider test: a server whose instances boot through the test's Booter, seeded with a network
// and an image, and terraform pointed at it through the environment.
func Example() {
	booter := &armtest.RecordingBooter{} // or a Booter that starts a simulated machine running nodeboot
	s, err := armtest.New(armtest.Options{Booter: booter, RetryAfter: 100 * time.Millisecond})
	if err != nil {
		panic(err)
	}
	defer func() { _ = s.Close() }()

	vnet, _ := s.AddVirtualNetwork(armtest.VirtualNetwork{
		ResourceGroup: "kubewin", Name: "vnet", AddressPrefixes: []string{"10.0.0.0/16"},
		Subnets: map[string]string{"nodes": "10.0.1.0/24"},
	})
	_ = s.AddImage(s.ResourceGroupID("images")+"/providers/Microsoft.Compute/galleries/g/images/ws2022/versions/1.0.0", nil)

	// The second PUT of scale set "win" is throttled once; its operation is held until released.
	s.Throttle(armtest.Match{Method: http.MethodPut, Path: `/virtualMachineScaleSets/win$`, Times: 1}, time.Second)
	hold := s.HoldOperations(armtest.Match{Method: http.MethodDelete, Path: `/virtualMachineScaleSets/win$`})

	cmd := exec.Command("terraform", "apply", "-auto-approve", "-var", "subnet_id="+vnet+"/subnets/nodes")
	cmd.Env = append(os.Environ(), s.Env()...) // ARM_METADATA_HOSTNAME, ARM_TENANT_ID, ..., SSL_CERT_FILE
	_ = cmd.Run()

	ctx := context.Background()
	_ = hold.WaitHits(ctx, 1) // terraform is deleting the scale set
	hold.Remove()
	booted, _ := booter.WaitBoots(ctx, 3)
	fmt.Println(len(booted), s.Writes().ByType["Microsoft.Compute/virtualMachineScaleSets"])
}

// Workload identity as in Terraform Cloud: an app trusts the test issuer's tokens for one subject.
func ExampleIssuer_Mint() {
	s, err := armtest.New(armtest.Options{})
	if err != nil {
		panic(err)
	}
	defer func() { _ = s.Close() }()
	subject := "organization:acme:project:default:workspace:nodes:run_phase:apply"
	app := s.RegisterApp(armtest.App{Federated: []armtest.FederatedCredential{{Issuer: s.Issuer().URL(), Subject: subject}}})
	token, _ := s.Issuer().Mint(subject, armtest.TokenExchangeAudience, 10*time.Minute)
	// ARM_CLIENT_ID=app.ClientID ARM_OIDC_TOKEN=token ARM_USE_OIDC=true
	fmt.Println(app.ClientID != "", token != "")
}
