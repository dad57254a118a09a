// Package armtest is an Azure Resource Manager and Entra ID server for kubewin's tests and demo.
//
// It serves, over HTTPS on 127.0.0.1 with its own throwaway CA, on one port:
//   - the cloud metadata document (GET /metadata/endpoints?api-version=2022-09-01) that points login
//     and resource manager at this server, so a client configured with the metadata host finds the rest;
//   - Entra ID's OpenID configuration and token endpoint for client credentials (client secret,
//     certificate assertion, federated OIDC token), with Entra's AADSTS error texts, for its tenant
//     and for other tenants a test adds, whose subscriptions share gallery images that ARM lets a
//     write use with the auxiliary token of their tenant (tenants.go);
//   - a test OIDC issuer whose tokens the token endpoint accepts as federated credentials;
//   - the ARM REST API kubewin's azure backend uses (Uniform VM scale sets and their instances,
//     virtual machines and their run command, boot diagnostics, managed, gallery and marketplace
//     images, route tables and routes, virtual networks, subnets, network security groups, public
//     IP addresses, Standard load balancers, NAT gateways and network interfaces) with ARM's
//     semantics, error shapes and long-running-operation protocol, and the network their machines'
//     connections cross (Reach: routes, outbound paths, load balancer frontends, security groups).
//
// It throttles as ARM and Compute do: per-subscription token buckets for reads, writes and deletes,
// and Compute's call-count windows for listing scale-set instances, with their
// x-ms-ratelimit-remaining-* headers and 429s with Retry-After (Options.TimeScale speeds its clock).
// Tests drive it through real azure-sdk-for-go clients, inject faults (throttling, 5xx, conflicts,
// failed or held operations, connection resets), count ARM writes and read a request log. Scale-set
// instances and virtual machines are "booted" by a Booter the caller provides, which also runs
// their run commands. Public IP addresses are handed out of 127.0.0.0/8, so that a simulated
// machine can bind the address of a load balancer frontend in its place. When given the ARM template JSON Schemas
// (Options.SchemasDir or KUBEWIN_ARM_SCHEMAS), every PUT and PATCH body is checked against them.
package armtest

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/kubewin/kubewin/internal/testkit/loopbackca"
)

// Environment variables the server reads.
const (
	// EnvSchemas names the directory of ARM template JSON Schemas used when Options.SchemasDir is empty.
	EnvSchemas = "KUBEWIN_ARM_SCHEMAS"
	// EnvValidatedFile names a file to which Close appends the number of request bodies the server
	// validated against the schemas (one decimal number per line), so that a make target can check
	// that a contract run validated anything at all.
	EnvValidatedFile = "KUBEWIN_ARM_VALIDATED_FILE"
)

// ARM api-versions the server implements: those of armcompute v6.4.0 and armnetwork v6.2.0.
const (
	ComputeAPIVersion = "2024-11-01"
	GalleryAPIVersion = "2024-03-03"
	NetworkAPIVersion = "2024-05-01"
	// ScaleSetNICAPIVersion is the api-version armnetwork's InterfacesClient uses to list the network
	// interfaces of a scale set (a Microsoft.Compute path).
	ScaleSetNICAPIVersion = "2018-10-01"
	// MetadataAPIVersion is the api-version of the cloud metadata document.
	MetadataAPIVersion = "2022-09-01"
)

// ManagementAudience is the classic ARM token audience, accepted by this server as by Azure.
const ManagementAudience = "https://management.core.windows.net/"

// Options configure a Server. The zero value is usable.
type Options struct {
	// Addr is the listen address; it must be on 127.0.0.1. Default "127.0.0.1:0".
	Addr string
	// Dir receives the CA certificate file. Default: a temporary directory removed by Close.
	Dir string
	// TenantID and SubscriptionID default to random UUIDs.
	TenantID, SubscriptionID string
	// Location of seeded resources. Default "westeurope".
	Location string
	// InProgressPolls is how many times the status of a long-running operation reads "InProgress"
	// before it ends. Default 0: the first poll sees the end.
	InProgressPolls int
	// RetryAfter is the Retry-After of long-running operations and of the server's own throttling
	// answers. Default 1s. Sub-second values are also sent as retry-after-ms, which azcore prefers.
	RetryAfter time.Duration
	// SettleAfter ends an operation nobody polls (a client that went away) this long after it began,
	// as Azure finishes its work whether or not anyone watches. Held operations wait for Release.
	// Default 10s.
	SettleAfter time.Duration
	// PageSize is the number of items in one page of a list answer. Default 50.
	PageSize int
	// MaxRoutesPerTable is the user-defined route limit of a route table. Default 400.
	MaxRoutesPerTable int
	// NICReservation is how long a network interface stays reserved for the virtual machine it was
	// attached to once that machine is deleted (nic.go). Default 180s, as Azure's.
	NICReservation time.Duration
	// TokenLifetime is the lifetime of the access tokens the token endpoint issues. Default 1h.
	TokenLifetime time.Duration
	// PrincipalReplication is how long after a managed identity is made a role assignment to it
	// that does not say its principalType fails with PrincipalNotFound, as while Microsoft Entra ID
	// replicates a new principal (authorization.go). Default 10s.
	PrincipalReplication time.Duration
	// SchemasDir holds ARM template JSON Schemas (Microsoft.Compute.2024-11-01.json,
	// Microsoft.Network.NRP.2024-05-01.json, common-definitions.json, ...). When set (default: the
	// KUBEWIN_ARM_SCHEMAS environment variable), every PUT and PATCH body is validated against them.
	SchemasDir string
	// TimeScale is how many times faster than the wall clock Azure's throttling clock runs: the
	// budgets' windows and refills pass, and their Retry-After shrinks, by this factor (see
	// throttle.go for the budgets). Default 1: real time.
	TimeScale float64
	// Booter starts and stops the machines behind scale-set instances. Nil: instances run nowhere.
	Booter Booter
	// Logf receives one line per request (method, path, status; never bodies). Nil: silent.
	Logf func(format string, args ...any)
}

func (o *Options) setDefaults() {
	if o.Addr == "" {
		o.Addr = "127.0.0.1:0"
	}
	if o.TenantID == "" {
		o.TenantID = newUUID()
	}
	if o.SubscriptionID == "" {
		o.SubscriptionID = newUUID()
	}
	if o.Location == "" {
		o.Location = "westeurope"
	}
	if o.RetryAfter <= 0 {
		o.RetryAfter = time.Second
	}
	if o.SettleAfter <= 0 {
		o.SettleAfter = 10 * time.Second
	}
	if o.PageSize <= 0 {
		o.PageSize = 50
	}
	if o.MaxRoutesPerTable <= 0 {
		o.MaxRoutesPerTable = 400
	}
	if o.NICReservation <= 0 {
		o.NICReservation = 180 * time.Second
	}
	if o.TokenLifetime <= 0 {
		o.TokenLifetime = time.Hour
	}
	if o.PrincipalReplication <= 0 {
		o.PrincipalReplication = 10 * time.Second
	}
	if o.SchemasDir == "" {
		o.SchemasDir = os.Getenv(EnvSchemas)
	}
	if o.TimeScale <= 0 {
		o.TimeScale = 1
	}
	if o.Booter == nil {
		o.Booter = nopBooter{}
	}
	if o.Logf == nil {
		o.Logf = func(string, ...any) {}
	}
}

// Server is a running ARM + Entra ID server. Its methods are safe for concurrent use.
type Server struct {
	opts    Options
	url     string // https://127.0.0.1:port
	host    string // 127.0.0.1:port
	caFile  string
	tmpDir  string // removed by Close; empty when the caller gave Dir
	ca      *loopbackca.Authority
	client  *http.Client
	httpSrv *http.Server
	imdsSrv *http.Server // the machines' instance metadata service (imds.go)
	imdsURL string       // http://127.0.0.1:port
	schemas *schemaSet   // nil: no schema validation

	ctx    context.Context // canceled by Close; Boot calls run under it
	cancel context.CancelFunc
	boots  sync.WaitGroup

	tokenKey *rsa.PrivateKey // signs the access tokens
	issuer   *Issuer

	mu         sync.Mutex // guards everything below
	apps       map[string]*App
	tenants    map[string]*tenant // other tenants by lower-case ID (tenants.go)
	identities map[string]string  // managed identities: client ID → object ID
	// userIdentities and roleAssignments are Microsoft.ManagedIdentity and Microsoft.Authorization
	// resources by lower-case ID (authorization.go).
	userIdentities  map[string]*userIdentity
	roleAssignments map[string]*roleAssignment
	// callerRoles are the roles on the subscription of the callers SetCallerRoles restricted, by
	// application (client) ID (permissions.go).
	callerRoles map[string][]string
	defaultApp  App
	groups      map[string]*resourceGroup // by lower-case name
	scaleSets   map[string]*scaleSet
	images      map[string]*image
	vnets       map[string]*virtualNetwork
	tables      map[string]*routeTable
	objects     map[string]*netObject
	vms         map[string]*virtualMachine
	coreQuota   map[string]int // lower-case VM family → vCPUs (computefaults.go)
	publicNet   [2]byte        // public addresses are 127.publicNet.n
	standInBase uint32         // stand-ins of private addresses count from 127.128.0.0 + standInBase
	publicUsed  map[netip.Addr]bool
	standIns    map[netip.Addr]netip.Addr // private address -> its loopback stand-in (hostaddr.go)
	ops         map[string]*operation
	blobs       map[string]blob
	imdsTokens  map[string]*machine // IMDS token → machine
	faults      []*Fault
	throttle    *throttle
	requests    []Request
	writes      map[string]int
	validated   int
	closed      bool
}

// New starts a server. Close it when done.
func New(opts Options) (*Server, error) {
	opts.setDefaults()
	host, _, err := net.SplitHostPort(opts.Addr)
	if err != nil || host != "127.0.0.1" {
		return nil, fmt.Errorf("armtest: listen address %q must be 127.0.0.1:<port>", opts.Addr)
	}
	s := &Server{
		opts:            opts,
		apps:            map[string]*App{},
		tenants:         map[string]*tenant{},
		identities:      map[string]string{},
		userIdentities:  map[string]*userIdentity{},
		callerRoles:     map[string][]string{},
		roleAssignments: map[string]*roleAssignment{},
		groups:          map[string]*resourceGroup{},
		scaleSets:       map[string]*scaleSet{},
		images:          map[string]*image{},
		vnets:           map[string]*virtualNetwork{},
		tables:          map[string]*routeTable{},
		objects:         map[string]*netObject{},
		vms:             map[string]*virtualMachine{},
		coreQuota:       map[string]int{},
		publicUsed:      map[netip.Addr]bool{},
		standIns:        map[netip.Addr]netip.Addr{},
		ops:             map[string]*operation{},
		blobs:           map[string]blob{},
		imdsTokens:      map[string]*machine{},
		writes:          map[string]int{},
		throttle:        newThrottle(opts.TimeScale),
	}
	if opts.SchemasDir != "" {
		if s.schemas, err = loadSchemas(opts.SchemasDir); err != nil {
			return nil, err
		}
	}
	if _, err := rand.Read(s.publicNet[:]); err != nil {
		return nil, err
	}
	s.publicNet[0] = 64 + s.publicNet[0]%64 // 127.64.0.0/10: away from 127.0.0.1
	var base [4]byte
	if _, err := rand.Read(base[:]); err != nil {
		return nil, err
	}
	s.standInBase = binary.BigEndian.Uint32(base[:]) % (1 << 22)
	if s.ca, err = loopbackca.New("armtest throwaway CA"); err != nil {
		return nil, err
	}
	if s.tokenKey, err = rsa.GenerateKey(rand.Reader, 2048); err != nil {
		return nil, err
	}
	dir := opts.Dir
	if dir == "" {
		if dir, err = os.MkdirTemp("", "armtest-"); err != nil {
			return nil, err
		}
		s.tmpDir = dir
	}
	s.caFile = filepath.Join(dir, "armtest-ca.pem")
	if err := os.WriteFile(s.caFile, s.ca.CertPEM, 0o644); err != nil {
		s.removeTmp()
		return nil, err
	}
	ln, err := net.Listen("tcp", opts.Addr)
	if err != nil {
		s.removeTmp()
		return nil, err
	}
	s.host = ln.Addr().String()
	s.url = "https://" + s.host
	s.client = &http.Client{
		Timeout:   30 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: s.ca.Pool, MinVersion: tls.VersionTLS12}},
	}
	if s.issuer, err = newIssuer(s.url + "/oidc"); err != nil {
		_ = ln.Close()
		s.removeTmp()
		return nil, err
	}
	if err := s.startIMDS(); err != nil {
		_ = ln.Close()
		s.removeTmp()
		return nil, err
	}
	s.defaultApp = s.RegisterApp(App{Secret: randomSecret()})
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.httpSrv = &http.Server{
		Handler:   s,
		TLSConfig: &tls.Config{Certificates: []tls.Certificate{s.ca.Serving}, MinVersion: tls.VersionTLS12},
		// HTTP/1.1 only, so that a fault can reset a request's connection.
		TLSNextProto:      map[string]func(*http.Server, *tls.Conn, http.Handler){},
		ReadHeaderTimeout: 10 * time.Second,
	}
	go func() { _ = s.httpSrv.ServeTLS(ln, "", "") }()
	return s, nil
}

// Close stops the server: it stops serving, waits for Boot calls in flight, shuts down every
// instance still running (as if the machines were switched off), removes its temporary directory,
// and appends the validated-body count to $KUBEWIN_ARM_VALIDATED_FILE when that is set.
func (s *Server) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.mu.Unlock()

	// A connection a client dialed and has not used yet counts as active for its first 5 s
	// (net/http): past that wait, the rest are closed.
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Second)
	defer cancel()
	err := s.httpSrv.Shutdown(ctx)
	if errors.Is(err, context.DeadlineExceeded) {
		err = s.httpSrv.Close()
	}
	_ = s.imdsSrv.Close()
	s.client.CloseIdleConnections()
	s.cancel()
	s.boots.Wait()

	s.mu.Lock()
	var running []Instance
	for _, ss := range s.scaleSets {
		for _, in := range ss.sortedInstances() {
			if in.bootDone != nil {
				running = append(running, in.info)
			}
		}
	}
	for _, vm := range s.vms {
		if vm.bootDone != nil {
			running = append(running, vm.info)
		}
	}
	validated := s.validated
	s.mu.Unlock()
	for _, in := range running {
		if serr := s.opts.Booter.Shutdown(context.Background(), in); serr != nil {
			err = errors.Join(err, fmt.Errorf("shutting down %s: %w", in.ComputerName, serr))
		}
	}
	if f := os.Getenv(EnvValidatedFile); f != "" && s.schemas != nil {
		err = errors.Join(err, appendLine(f, fmt.Sprint(validated)))
	}
	s.removeTmp()
	return err
}

func (s *Server) removeTmp() {
	if s.tmpDir != "" {
		_ = os.RemoveAll(s.tmpDir)
	}
}

func appendLine(path, line string) error {
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	_, err = f.WriteString(line + "\n")
	return errors.Join(err, f.Close())
}

// URL is the server's base URL, https://127.0.0.1:<port>: the resource manager endpoint and the
// Entra authority host.
func (s *Server) URL() string { return s.url }

// MetadataHost is the host a client reads cloud metadata from (azurerm's metadata_host,
// ARM_METADATA_HOSTNAME): 127.0.0.1:<port>.
func (s *Server) MetadataHost() string { return s.host }

// CAFile is the PEM file of the CA that signed the server's certificate. Go programs trust it when
// SSL_CERT_FILE names it.
func (s *Server) CAFile() string { return s.caFile }

// HTTPClient is an HTTP client that trusts the server's CA (usable as azcore's Transport).
func (s *Server) HTTPClient() *http.Client { return s.client }

// TenantID is the server's Entra tenant, that of its subscription.
func (s *Server) TenantID() string { return s.opts.TenantID }

// SubscriptionID is the one subscription the server serves.
func (s *Server) SubscriptionID() string { return s.opts.SubscriptionID }

// Location is the region of seeded resources.
func (s *Server) Location() string { return s.opts.Location }

// Issuer is the server's test OIDC issuer.
func (s *Server) Issuer() *Issuer { return s.issuer }

// Credentials are the tenant, subscription and client secret of the app registered at start.
type Credentials struct {
	TenantID, SubscriptionID, ClientID, ClientSecret string
}

// Credentials returns the credentials of the app registered at start.
func (s *Server) Credentials() Credentials {
	return Credentials{
		TenantID:       s.opts.TenantID,
		SubscriptionID: s.opts.SubscriptionID,
		ClientID:       s.defaultApp.ClientID,
		ClientSecret:   s.defaultApp.Secret,
	}
}

// Env is the environment a program (terraform with kubewin's provider, azurerm-style configuration)
// needs to reach the server with the start-up app's client secret.
func (s *Server) Env() []string {
	c := s.Credentials()
	return []string{
		"ARM_METADATA_HOSTNAME=" + s.host,
		"ARM_TENANT_ID=" + c.TenantID,
		"ARM_SUBSCRIPTION_ID=" + c.SubscriptionID,
		"ARM_CLIENT_ID=" + c.ClientID,
		"ARM_CLIENT_SECRET=" + c.ClientSecret,
		"SSL_CERT_FILE=" + s.caFile,
	}
}

// audiences are the token audiences ARM accepts: the classic management audience and the
// resource manager URL, as in the metadata document.
func (s *Server) audiences() []string { return []string{ManagementAudience, s.url + "/"} }

// maxBody bounds request bodies; ARM's own limit is 4 MiB.
const maxBody = 4 << 20

// ServeHTTP dispatches a request: faults first, then metadata, the OIDC issuer, boot-diagnostics
// blobs, ARM (paths under /subscriptions/) and Entra (every other path: /{tenant}/...).
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
	if err != nil {
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
	path := r.URL.Path
	isARM := strings.HasPrefix(strings.ToLower(path), "/subscriptions/")

	switch f := s.requestFault(r.Method, path); {
	case f != nil && f.kind == faultLoseResponse && isARM:
		lost := &statusRecorder{ResponseWriter: &lostResponse{header: http.Header{}}, status: http.StatusOK}
		s.serveARM(lost, r, body)
		rec.status, rec.resourceType = lost.status, lost.resourceType
		resetConnection(w)
	case f != nil:
		f.serve(rec, r, s.opts.RetryAfter)
	case len(body) > maxBody:
		writeError(rec, newError(http.StatusRequestEntityTooLarge, "RequestContentTooLarge", "the request body is larger than 4 MiB"))
	case path == "/metadata/endpoints":
		s.serveMetadata(rec, r)
	case strings.HasPrefix(path, "/oidc/"):
		s.issuer.serve(rec, r)
	case path == ManagedIdentityPath:
		s.serveManagedIdentity(rec, r)
	case strings.HasPrefix(path, blobPrefix):
		s.serveBlob(rec, r)
	case isARM:
		s.serveARM(rec, r, body)
	default:
		s.serveEntra(rec, r)
	}

	s.opts.Logf("%s %s -> %d", r.Method, path, rec.status)
	if isARM {
		s.record(r, body, rec)
	}
}

// statusRecorder remembers the status of an answer and the resource type the router matched.
type statusRecorder struct {
	http.ResponseWriter
	status       int
	resourceType string
}

func (r *statusRecorder) WriteHeader(code int) {
	r.status = code
	r.ResponseWriter.WriteHeader(code)
}

// Hijack lets a fault reset the connection.
func (r *statusRecorder) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	h, ok := r.ResponseWriter.(http.Hijacker)
	if !ok {
		return nil, nil, errors.New("the connection cannot be taken over")
	}
	return h.Hijack()
}

func newUUID() string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err) // crypto/rand does not fail on supported platforms
	}
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
}

func randomSecret() string {
	var b [24]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err)
	}
	return fmt.Sprintf("armtest~%x", b)
}
