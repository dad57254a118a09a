package armtest

import (
	"net"
	"net/http"
	"path"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/arm"
)

// The instance metadata service (IMDS): a plain-HTTP endpoint per machine, which the machine's
// Instance.MetadataEndpoint names and where it reads what Azure's IMDS at 169.254.169.254 tells a
// VM about itself (https://learn.microsoft.com/en-us/azure/virtual-machines/instance-metadata-service).
// The rules enforced are that page's: "Metadata: true" is required, requests with an
// X-Forwarded-For header are refused, and an api-version must be given. Its token endpoint
// (ManagedIdentityPath) serves the managed identities the machine carries, and no other.

// startIMDS starts the metadata listener.
func (s *Server) startIMDS() error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	s.imdsURL = "http://" + ln.Addr().String()
	s.imdsSrv = &http.Server{Handler: http.HandlerFunc(s.serveIMDS), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = s.imdsSrv.Serve(ln) }()
	return nil
}

// metadataEndpoint registers a machine's metadata endpoint; s.mu is held.
func (s *Server) metadataEndpoint(m *machine) string {
	token := strings.ReplaceAll(newUUID(), "-", "")
	s.imdsTokens[token] = m
	return s.imdsURL + "/" + token
}

// imdsInstance is the part of /metadata/instance the server answers, in the names of the IMDS
// page's "Instance metadata" schema: compute.osProfile is in every api-version from 2020-07-15;
// network.interface[].ipv4.ipAddress[] holds the private addresses (the primary one here).
type imdsInstance struct {
	Compute imdsCompute `json:"compute"`
	Network imdsNetwork `json:"network"`
}

type imdsCompute struct {
	Name              string        `json:"name"`
	OSType            string        `json:"osType"`
	ResourceID        string        `json:"resourceId"`
	VMScaleSetName    string        `json:"vmScaleSetName"`
	OSProfile         imdsOSProfile `json:"osProfile"`
	Location          string        `json:"location"`
	VMSize            string        `json:"vmSize"`
	Zone              string        `json:"zone"`
	SubscriptionID    string        `json:"subscriptionId"`
	ResourceGroupName string        `json:"resourceGroupName"`
	// PlatformFaultDomain is "0": the server models no fault domains.
	PlatformFaultDomain string `json:"platformFaultDomain"`
}

type imdsOSProfile struct {
	ComputerName string `json:"computerName"`
}

type imdsNetwork struct {
	Interface []imdsInterface `json:"interface"`
}

type imdsInterface struct {
	IPv4 struct {
		IPAddress []imdsIPAddress `json:"ipAddress"`
	} `json:"ipv4"`
}

type imdsIPAddress struct {
	PrivateIPAddress string `json:"privateIpAddress"`
	PublicIPAddress  string `json:"publicIpAddress"`
}

func (s *Server) serveIMDS(w http.ResponseWriter, r *http.Request) {
	token, rest, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
	s.mu.Lock()
	m := s.imdsTokens[token]
	var info Instance
	if m != nil {
		info = m.info
	}
	s.mu.Unlock()
	imdsError := func(status int, msg string) { writeJSON(w, status, map[string]string{"error": msg}) }
	if m != nil && "/"+rest == ManagedIdentityPath {
		s.serveIMDSToken(w, r, info.Identities)
		return
	}
	switch {
	case m == nil || rest != "metadata/instance":
		imdsError(http.StatusNotFound, "Not found")
	case r.Method != http.MethodGet:
		imdsError(http.StatusMethodNotAllowed, "Method not allowed")
	case r.Header.Get("Metadata") != "true":
		imdsError(http.StatusBadRequest, "Bad request. Required metadata header not specified")
	case r.Header.Get("X-Forwarded-For") != "":
		imdsError(http.StatusBadRequest, "Bad request. Requests with X-Forwarded-For header are not allowed")
	case r.URL.Query().Get("api-version") == "":
		imdsError(http.StatusBadRequest, "Bad request. api-version was not specified in the request")
	default:
		c := imdsCompute{OSType: "Windows", ResourceID: info.ID, OSProfile: imdsOSProfile{ComputerName: info.ComputerName},
			Location: info.Location, VMSize: info.VMSize, Zone: info.Zone, PlatformFaultDomain: "0"}
		if id, err := arm.ParseResourceID(info.ID); err == nil {
			c.SubscriptionID, c.ResourceGroupName = id.SubscriptionID, id.ResourceGroupName
		}
		if info.Linux {
			c.OSType = "Linux"
		}
		c.Name = path.Base(info.ID)
		if info.ScaleSetID != "" {
			c.VMScaleSetName = path.Base(info.ScaleSetID)
			c.Name = c.VMScaleSetName + "_" + info.InstanceID
		}
		var nic imdsInterface
		nic.IPv4.IPAddress = []imdsIPAddress{{PrivateIPAddress: info.PrivateIP.String()}}
		writeJSON(w, http.StatusOK, imdsInstance{Compute: c, Network: imdsNetwork{Interface: []imdsInterface{nic}}})
	}
}
