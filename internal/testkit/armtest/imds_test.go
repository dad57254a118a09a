package armtest

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// A booted instance reads its own metadata from its IMDS endpoint, with IMDS's rules.
func TestInstanceMetadata(t *testing.T) {
	f := newFixture(t, Options{})
	f.createScaleSet(t, "win", f.windowsScaleSet(1, ""))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	booted, err := f.booter.WaitBoots(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	in := booted[0]
	get := func(url string, header map[string]string) (int, string) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		for k, v := range header {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = resp.Body.Close() }()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	url := in.MetadataEndpoint + "/metadata/instance?api-version=2021-02-01"
	for _, c := range []struct {
		url    string
		header map[string]string
		want   string
	}{
		{url, nil, "Required metadata header not specified"},
		{url, map[string]string{"Metadata": "true", "X-Forwarded-For": "10.0.0.1"}, "X-Forwarded-For"},
		{in.MetadataEndpoint + "/metadata/instance", map[string]string{"Metadata": "true"}, "api-version was not specified"},
	} {
		if code, body := get(c.url, c.header); code != http.StatusBadRequest || !strings.Contains(body, c.want) {
			t.Errorf("GET %s %v = %d %s, want 400 %q", c.url, c.header, code, body, c.want)
		}
	}
	code, body := get(url, map[string]string{"Metadata": "true"})
	var md imdsInstance
	if err := json.Unmarshal([]byte(body), &md); code != http.StatusOK || err != nil {
		t.Fatalf("GET %s = %d %s (%v)", url, code, body, err)
	}
	c := md.Compute
	if c.OSProfile.ComputerName != in.ComputerName || c.Name != "win_"+in.InstanceID || c.VMScaleSetName != "win" || c.OSType != "Windows" {
		t.Errorf("instance metadata %+v, instance %s %s", c, in.ComputerName, in.InstanceID)
	}
	// What the cloud provider's node manager reads: location, size, zone, subscription, group,
	// the primary private address.
	if c.Location != f.s.Location() || c.VMSize == "" || c.VMSize != in.VMSize || c.SubscriptionID != f.s.SubscriptionID() ||
		!strings.HasSuffix(in.ScaleSetID, "/virtualMachineScaleSets/win") || !strings.Contains(in.ID, "/resourceGroups/"+c.ResourceGroupName+"/") ||
		len(md.Network.Interface) != 1 || md.Network.Interface[0].IPv4.IPAddress[0].PrivateIPAddress != in.PrivateIP.String() {
		t.Errorf("instance metadata %+v %+v, instance %+v", c, md.Network, in)
	}
}
