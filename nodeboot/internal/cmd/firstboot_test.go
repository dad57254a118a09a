package cmd

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/kubewin/kubewin/internal/sim/simmachine"
)

// On its first boot the nodeboot service starts while Windows setup runs: the NodeConfig is not
// written yet and the computer has a temporary name. The join waits for setup and for the
// NodeConfig, and names the node after IMDS's compute.osProfile.computerName, lower-cased.
func TestBinaryFirstBoot(t *testing.T) {
	const name = "winfb000001"
	metadata := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/metadata/instance" || r.Header.Get("Metadata") != "true" || r.URL.Query().Get("api-version") == "" {
			http.Error(w, `{"error":"Bad request"}`, http.StatusBadRequest)
			return
		}
		_, _ = fmt.Fprintf(w, `{"compute":{"name":"fbpool_1","osProfile":{"computerName":%q}}}`, strings.ToUpper(name))
	}))
	defer metadata.Close()
	root, customData := provision(t, "fbpool", name, "", func(m *simmachine.Machine) {
		m.ComputerName = name
		m.SetupCompleteAt = time.Now().Add(3 * time.Second)
		m.MetadataEndpoint = metadata.URL
	})
	written := make(chan error, 1)
	time.AfterFunc(1500*time.Millisecond, func() { written <- simmachine.WriteCustomData(root, customData) })

	out := nb(t, root, "join", "phase", "discovery")
	if err := <-written; err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"[first-boot] waiting for Windows setup to complete (ImageState IMAGE_STATE_UNDEPLOYABLE)",
		"[first-boot] Windows setup is complete and the NodeConfig is there", "[discovery] done"} {
		if !strings.Contains(out, want) {
			t.Errorf("join output lacks %q:\n%s", want, out)
		}
	}
	if status := nb(t, root, "status"); !strings.Contains(status, "node "+name+":") {
		t.Errorf("the node is not named after the instance metadata's computer name:\n%s", status)
	}
}
