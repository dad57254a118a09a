package armtest

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/netip"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v6"
	"github.com/kubewin/kubewin/internal/winname"
)

// Microsoft.Compute: Uniform virtual machine scale sets, their instances, boot diagnostics, and
// the images they are created from.

// Compute provisioning states.
const (
	stateCreating  = "Creating"
	stateUpdating  = "Updating"
	stateSucceeded = "Succeeded"
	stateFailed    = "Failed"
	stateDeleting  = "Deleting"
)

// Limits Compute enforces.
const (
	maxCustomData       = 65535 // bytes, decoded (osProfile.customData; 87380 base64 characters)
	maxCapacity         = 1000  // instances of a Uniform scale set with a single placement group off
	maxWindowsPrefix    = winname.MaxPrefix
	maxLinuxPrefix      = 58
	maxWindowsAdminName = 20
)

type scaleSet struct {
	id       string
	location string
	model    armcompute.VirtualMachineScaleSet // as accepted, secrets included, read-only fields cleared
	state    string
	uniqueID string
	created  time.Time
	// modelGen counts changes of properties.virtualMachineProfile; an instance created with the
	// current generation has the latest model.
	modelGen  int
	nextID    int
	instances map[int]*vmInstance
}

type vmInstance struct {
	machine
	id       int
	profile  *armcompute.VirtualMachineScaleSetVMProfile // the model it was created with
	modelGen int
	vmID     string
	state    string
	created  time.Time
	nics     []instanceNIC
}

// machine is what boots: a scale-set instance or a virtual machine.
type machine struct {
	info Instance
	// bootDone is closed when Boot returned; nil when Boot was never called.
	bootDone chan struct{}
}

func machinesOf(ins []*vmInstance) []*machine {
	out := make([]*machine, len(ins))
	for i, in := range ins {
		out[i] = &in.machine
	}
	return out
}

type instanceNIC struct {
	name                               string
	primary, ipForwarding, accelerated bool
	mac                                string
	ipConfigs                          []instanceIPConfig
}

type instanceIPConfig struct {
	name    string
	primary bool
	subnet  *subnet
	addr    netip.Addr
}

func (in *vmInstance) resourceID(ss *scaleSet) string {
	return ss.id + "/virtualMachines/" + strconv.Itoa(in.id)
}

func (ss *scaleSet) sortedInstances() []*vmInstance {
	out := make([]*vmInstance, 0, len(ss.instances))
	for _, in := range ss.instances {
		out = append(out, in)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].id < out[j].id })
	return out
}

// scaleSet returns the scale set a request addresses, or the error for a missing one; s.mu is held.
func (s *Server) scaleSet(q *armRequest) (*scaleSet, *apiError) {
	ss := s.scaleSets[strings.ToLower(q.id(8))]
	if ss == nil {
		return nil, errResourceNotFound(typeScaleSet, q.name(2), q.group)
	}
	return ss, nil
}

// Instances returns the instances of a scale set (by ARM ID), in instance ID order, including
// those being created or deleted.
func (s *Server) Instances(scaleSetID string) []Instance {
	s.mu.Lock()
	defer s.mu.Unlock()
	ss := s.scaleSets[strings.ToLower(scaleSetID)]
	if ss == nil {
		return nil
	}
	var out []Instance
	for _, in := range ss.sortedInstances() {
		out = append(out, in.info)
	}
	return out
}

func (s *Server) listScaleSets(w http.ResponseWriter, q *armRequest) *apiError {
	s.mu.Lock()
	defer s.mu.Unlock()
	prefix := strings.ToLower(q.id(len(q.route.segs))) + "/"
	var ids []string
	for key := range s.scaleSets {
		if strings.HasPrefix(key, prefix) {
			ids = append(ids, key)
		}
	}
	sort.Strings(ids)
	start, end, next, e := s.page(q, len(ids))
	if e != nil {
		return e
	}
	res := armcompute.VirtualMachineScaleSetListResult{NextLink: next, Value: []*armcompute.VirtualMachineScaleSet{}}
	for _, key := range ids[start:end] {
		v := s.scaleSets[key].view(false)
		res.Value = append(res.Value, &v)
	}
	writeJSON(w, http.StatusOK, res)
	return nil
}

func (s *Server) getScaleSet(w http.ResponseWriter, q *armRequest) *apiError {
	exp, e := expand(q, "userData")
	if e != nil {
		return e
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	ss, e := s.scaleSet(q)
	if e != nil {
		return e
	}
	writeJSON(w, http.StatusOK, ss.view(exp == "userData"))
	return nil
}

// view is the scale set as GET returns it: adminPassword and customData are never returned,
// userData only on request.
func (ss *scaleSet) view(withUserData bool) armcompute.VirtualMachineScaleSet {
	out := clone(&ss.model)
	out.ID, out.Name, out.Type, out.Location = to.Ptr(ss.id), to.Ptr(lastSegment(ss.id)), to.Ptr(typeScaleSet), to.Ptr(ss.location)
	p := out.Properties
	p.ProvisioningState, p.UniqueID, p.TimeCreated = to.Ptr(ss.state), to.Ptr(ss.uniqueID), to.Ptr(ss.created)
	if os := p.VirtualMachineProfile.OSProfile; os != nil {
		os.AdminPassword, os.CustomData = nil, nil
	}
	if !withUserData {
		p.VirtualMachineProfile.UserData = nil
	}
	return *out
}

func (s *Server) putScaleSet(w http.ResponseWriter, q *armRequest) *apiError {
	var m armcompute.VirtualMachineScaleSet
	if e := s.decodeBody(q, &m); e != nil {
		return e
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.writeScaleSet(w, q, m, s.scaleSets[strings.ToLower(q.resourceID())])
}

func (s *Server) patchScaleSet(w http.ResponseWriter, q *armRequest) *apiError {
	var patch armcompute.VirtualMachineScaleSetUpdate
	if e := s.decodeBody(q, &patch); e != nil {
		return e
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	old, e := s.scaleSet(q)
	if e != nil {
		return e
	}
	var doc, p any
	current, err := json.Marshal(&old.model)
	if err != nil || json.Unmarshal(current, &doc) != nil || json.Unmarshal(q.body, &p) != nil {
		return newError(http.StatusInternalServerError, "InternalServerError", "merging the PATCH body: %v", err)
	}
	merged, err := json.Marshal(mergePatch(doc, p))
	if err != nil {
		return newError(http.StatusInternalServerError, "InternalServerError", "merging the PATCH body: %v", err)
	}
	var m armcompute.VirtualMachineScaleSet
	if err := json.Unmarshal(merged, &m); err != nil {
		return newError(http.StatusBadRequest, "InvalidRequestContent", "The PATCH body does not merge into a scale set: %v", err)
	}
	return s.writeScaleSet(w, q, m, old)
}

// scaleSetPlan is a checked scale set model: what its instances are made of.
type scaleSetPlan struct {
	capacity   int
	prefix     string
	linux      bool
	imageID    string
	customData []byte
	nics       []nicPlan
}

type nicPlan struct {
	name                               string
	primary, ipForwarding, accelerated bool
	ipConfigs                          []ipConfigPlan
}

type ipConfigPlan struct {
	name    string
	primary bool
	subnet  *subnet
}

// writeScaleSet creates or updates a scale set (old is nil on create) from a PUT body or a
// PATCH merged into the current model; s.mu is held.
func (s *Server) writeScaleSet(w http.ResponseWriter, q *armRequest, m armcompute.VirtualMachineScaleSet, old *scaleSet) *apiError {
	id := q.resourceID()
	if op := s.busy(id); op != nil {
		return s.conflict(op, id)
	}
	plan, e := s.checkScaleSet(id, &m, old)
	if e != nil {
		return e
	}
	ss, status := old, http.StatusOK
	if ss == nil {
		status = http.StatusCreated
		ss = &scaleSet{id: id, location: *m.Location, uniqueID: newUUID(), created: time.Now().UTC(), instances: map[int]*vmInstance{}}
	}
	added, e := s.createInstances(ss, plan, &m)
	if e != nil {
		return e
	}
	if old == nil || !sameJSON(old.model.Properties.VirtualMachineProfile, m.Properties.VirtualMachineProfile) {
		ss.modelGen++
	}
	for _, in := range added {
		in.modelGen = ss.modelGen
	}
	s.scaleSets[strings.ToLower(id)] = ss
	ss.model = m
	ss.state = stateUpdating
	if old == nil {
		ss.state = stateCreating
	}
	removed := ss.scaleIn(plan.capacity)
	op := s.startOperation(q, id, func(failure *apiError) func() {
		if failure != nil {
			ss.state = stateFailed
			for _, in := range append(added, removed...) {
				in.state = stateFailed
			}
			return nil
		}
		ss.state = stateSucceeded
		for _, in := range added {
			in.state = stateSucceeded
		}
		s.removeInstances(ss, removed)
		return func() { s.bootAll(machinesOf(added)); s.shutdownAll(machinesOf(removed)) }
	})
	s.writeStarted(w, op, status, ss.view(false))
	return nil
}

// checkScaleSet checks and completes a scale set model as Compute does; s.mu is held.
func (s *Server) checkScaleSet(id string, m *armcompute.VirtualMachineScaleSet, old *scaleSet) (*scaleSetPlan, *apiError) {
	if m.Location == nil || *m.Location == "" {
		return nil, newError(http.StatusBadRequest, "LocationRequired", "The location property is required for this definition.")
	}
	if old != nil && !strings.EqualFold(*m.Location, old.location) {
		return nil, changeNotAllowed("location")
	}
	if m.SKU == nil || m.SKU.Name == nil || m.SKU.Capacity == nil {
		return nil, invalidParameter("sku", "Required parameters 'sku.name' and 'sku.capacity' are missing: give the VM size (e.g. Standard_D4s_v5) and the number of instances.")
	}
	capacity := *m.SKU.Capacity
	if capacity < 0 || capacity > maxCapacity {
		return nil, invalidParameter("sku.capacity", "sku.capacity is %d; it must be between 0 and %d.", capacity, maxCapacity)
	}
	p := m.Properties
	if p == nil || p.VirtualMachineProfile == nil {
		return nil, invalidParameter("properties.virtualMachineProfile", "Required parameter 'properties.virtualMachineProfile' is missing.")
	}
	// Clear what only the server sets; a client may send back what it read.
	m.ID, m.Name, m.Type, m.Etag = nil, nil, nil, nil
	p.ProvisioningState, p.UniqueID, p.TimeCreated = nil, nil, nil

	if p.OrchestrationMode == nil {
		p.OrchestrationMode = to.Ptr(armcompute.OrchestrationModeUniform)
	}
	if *p.OrchestrationMode != armcompute.OrchestrationModeUniform {
		return nil, invalidParameter("properties.orchestrationMode",
			"orchestrationMode is %q: armtest serves Uniform scale sets only (instance IDs and computer names are Uniform's); set it to Uniform.", *p.OrchestrationMode)
	}
	if old != nil && *old.model.Properties.OrchestrationMode != *p.OrchestrationMode {
		return nil, changeNotAllowed("orchestrationMode")
	}
	if p.Overprovision == nil || *p.Overprovision {
		return nil, invalidParameter("properties.overprovision",
			"properties.overprovision is true or unset (Azure then overprovisions): overprovisioned VMs boot with the same custom data and could join the cluster before Azure deletes them. Set properties.overprovision to false.")
	}
	if p.UpgradePolicy == nil || p.UpgradePolicy.Mode == nil {
		p.UpgradePolicy = &armcompute.UpgradePolicy{Mode: to.Ptr(armcompute.UpgradeModeManual)}
	}
	if *p.UpgradePolicy.Mode != armcompute.UpgradeModeManual {
		return nil, invalidParameter("properties.upgradePolicy.mode",
			"upgradePolicy.mode is %q: armtest implements the Manual upgrade policy only (existing instances keep their model); set it to Manual.", *p.UpgradePolicy.Mode)
	}
	plan := &scaleSetPlan{capacity: int(capacity)}
	vmp := p.VirtualMachineProfile
	if e := s.checkOSProfile(vmp, old, plan); e != nil {
		return nil, e
	}
	if e := s.checkImage(vmp, plan); e != nil {
		return nil, e
	}
	if e := s.checkNetworkProfile(id, *m.Location, vmp, plan); e != nil {
		return nil, e
	}
	return plan, nil
}

func changeNotAllowed(property string) *apiError {
	e := newError(http.StatusConflict, "PropertyChangeNotAllowed", "Changing property '%s' is not allowed.", property)
	e.Target = property
	return e
}

var (
	prefixChars        = regexp.MustCompile(`^[A-Za-z0-9-]+$`)
	allDigits          = regexp.MustCompile(`^[0-9]+$`)
	disallowedAdmins   = strings.Fields("administrator admin user user1 test user2 test1 user3 admin1 1 123 a actuser adm admin2 aspnet backup console david guest john owner root server sql support support_388945a0 sys test2 test3 user4 user5")
	disallowedPassword = []string{"abc@123", "P@$$w0rd", "P@ssw0rd", "P@ssword123", "Pa$$word", "pass@word1", "Password!", "Password1", "Password22", "iloveyou!"}
)

// checkOSProfile checks the OS profile; on an update, an omitted adminPassword or customData keeps
// the current one (GET never returns them, so a read-modify-write cannot send them back).
func (s *Server) checkOSProfile(vmp *armcompute.VirtualMachineScaleSetVMProfile, old *scaleSet, plan *scaleSetPlan) *apiError {
	osp := vmp.OSProfile
	if osp == nil || osp.ComputerNamePrefix == nil || osp.AdminUsername == nil {
		return invalidParameter("osProfile", "Required parameters osProfile.computerNamePrefix and osProfile.adminUsername are missing.")
	}
	windows := osp.LinuxConfiguration == nil
	prefix, user := *osp.ComputerNamePrefix, *osp.AdminUsername
	maxPrefix := maxLinuxPrefix
	if windows {
		maxPrefix = maxWindowsPrefix
	}
	switch {
	case prefix == "" || len(prefix) > maxPrefix:
		return invalidParameter("computerNamePrefix",
			"computerNamePrefix %q is %d characters long; it must be 1 to %d characters (Windows computer names hold 15 characters, of which the instance suffix takes 6).", prefix, len(prefix), maxPrefix)
	case !prefixChars.MatchString(prefix) || allDigits.MatchString(prefix):
		return invalidParameter("computerNamePrefix", "computerNamePrefix %q may hold only letters, digits and '-', and cannot be entirely numeric.", prefix)
	}
	if old != nil {
		oldOS := old.model.Properties.VirtualMachineProfile.OSProfile
		if *oldOS.ComputerNamePrefix != prefix {
			return changeNotAllowed("computerNamePrefix")
		}
		if *oldOS.AdminUsername != user {
			return changeNotAllowed("adminUsername")
		}
		if osp.AdminPassword == nil {
			osp.AdminPassword = oldOS.AdminPassword
		}
		if osp.CustomData == nil {
			osp.CustomData = oldOS.CustomData
		}
	}
	if e := checkAdmin(user, osp.AdminPassword, osp.LinuxConfiguration); e != nil {
		return e
	}
	plan.prefix, plan.linux = prefix, !windows
	data, e := decodeCustomData(osp.CustomData)
	if e != nil {
		return e
	}
	plan.customData = data
	return nil
}

// checkAdmin checks the administrator account of a Windows or Linux OS profile.
func checkAdmin(user string, password *string, linux *armcompute.LinuxConfiguration) *apiError {
	if linux != nil {
		keys := 0
		if linux.SSH != nil {
			for _, k := range linux.SSH.PublicKeys {
				if k == nil || k.KeyData == nil || !strings.HasPrefix(*k.KeyData, "ssh-") || k.Path == nil {
					return invalidParameter("linuxConfiguration.ssh.publicKeys", "An SSH public key needs keyData (an OpenSSH public key, \"ssh-ed25519 AAAA...\") and path.")
				}
				if *k.Path != "/home/"+user+"/.ssh/authorized_keys" {
					return invalidParameter("linuxConfiguration.ssh.publicKeys.path", "The SSH key path %q must be /home/%s/.ssh/authorized_keys.", *k.Path, user)
				}
				keys++
			}
		}
		noPassword := linux.DisablePasswordAuthentication != nil && *linux.DisablePasswordAuthentication
		switch {
		case user == "" || len(user) > 64 || contains(disallowedAdmins, strings.ToLower(user)):
			return invalidParameter("adminUsername", "The admin user name %q is not allowed or not 1 to 64 characters long.", user)
		case noPassword && keys == 0:
			return invalidParameter("linuxConfiguration.ssh.publicKeys", "Password authentication is disabled: give at least one SSH public key.")
		case !noPassword && password == nil:
			return invalidParameter("adminPassword", "Required parameter 'adminPassword' is missing (null): give one, or disable password authentication and give an SSH key.")
		}
		return nil
	}
	lower := strings.ToLower(user)
	switch {
	case user == "" || len(user) > maxWindowsAdminName || strings.HasSuffix(user, "."):
		return invalidParameter("adminUsername", "The admin user name %q must be 1 to %d characters long and cannot end in '.'.", user, maxWindowsAdminName)
	case contains(disallowedAdmins, lower):
		return invalidParameter("adminUsername", "The admin user name %q is not allowed; choose a less common name.", user)
	}
	if password == nil {
		return invalidParameter("adminPassword", "Required parameter 'adminPassword' is missing (null).")
	}
	if !goodPassword(*password) {
		return invalidParameter("adminPassword",
			"The supplied password must be between 8-123 characters long and must satisfy at least 3 of password complexity requirements from the following: 1) Contains an uppercase character 2) Contains a lowercase character 3) Contains a numeric digit 4) Contains a special character 5) Control characters are not allowed")
	}
	return nil
}

// decodeCustomData decodes osProfile.customData (nil when absent).
func decodeCustomData(v *string) ([]byte, *apiError) {
	if v == nil {
		return nil, nil
	}
	data, err := base64.StdEncoding.DecodeString(*v)
	if err != nil || len(data) > maxCustomData {
		return nil, invalidParameter("customData",
			"Custom data in OSProfile must be in Base64 encoding and with a maximum length of 87380 characters (%d bytes decoded).", maxCustomData)
	}
	return data, nil
}

// goodPassword applies Azure's Windows password rules.
func goodPassword(pw string) bool {
	if len(pw) < 8 || len(pw) > 123 || contains(disallowedPassword, pw) {
		return false
	}
	var upper, lower, digit, special bool
	for _, r := range pw {
		switch {
		case r < 0x20 || r == 0x7f:
			return false
		case r >= 'A' && r <= 'Z':
			upper = true
		case r >= 'a' && r <= 'z':
			lower = true
		case r >= '0' && r <= '9':
			digit = true
		default:
			special = true
		}
	}
	n := 0
	for _, ok := range []bool{upper, lower, digit, special} {
		if ok {
			n++
		}
	}
	return n >= 3
}

// checkImage resolves the image reference to a seeded managed image or gallery image version.
func (s *Server) checkImage(vmp *armcompute.VirtualMachineScaleSetVMProfile, plan *scaleSetPlan) *apiError {
	sp := vmp.StorageProfile
	if sp == nil || sp.ImageReference == nil {
		return invalidParameter("imageReference", "Required parameter 'storageProfile.imageReference' is missing.")
	}
	id, e := s.imageOf(sp.ImageReference)
	if e != nil {
		return e
	}
	plan.imageID = id
	return nil
}

// Marketplace images the server knows (Linux machines boot from them).
var marketplaceImages = []struct{ publisher, offer, sku string }{
	{"Canonical", "ubuntu-24_04-lts", "server"},
	{"Canonical", "0001-com-ubuntu-server-jammy", "22_04-lts-gen2"},
}

// imageOf resolves an image reference: a seeded managed image or gallery image (by ID), or a
// marketplace image it knows (publisher, offer, sku and version), returned as its URN; s.mu is
// held.
func (s *Server) imageOf(ref *armcompute.ImageReference) (string, *apiError) {
	if ref.ID != nil && *ref.ID != "" {
		return s.resolveImage(*ref.ID)
	}
	if ref.Publisher == nil || ref.Offer == nil || ref.SKU == nil || ref.Version == nil {
		return "", invalidParameter("imageReference", "storageProfile.imageReference needs an id (a managed or gallery image), or publisher, offer, sku and version (a marketplace image).")
	}
	for _, m := range marketplaceImages {
		if strings.EqualFold(m.publisher, *ref.Publisher) && strings.EqualFold(m.offer, *ref.Offer) && strings.EqualFold(m.sku, *ref.SKU) {
			return strings.Join([]string{m.publisher, m.offer, m.sku, *ref.Version}, ":"), nil
		}
	}
	return "", newError(http.StatusNotFound, "PlatformImageNotFound",
		"The platform image '%s:%s:%s:%s' is not available. Verify that all fields in the storage profile are correct (armtest knows %v).", *ref.Publisher, *ref.Offer, *ref.SKU, *ref.Version, marketplaceImages)
}

// checkNetworkProfile checks the NIC configurations and finds their subnets; s.mu is held.
func (s *Server) checkNetworkProfile(id, location string, vmp *armcompute.VirtualMachineScaleSetVMProfile, plan *scaleSetPlan) *apiError {
	np := vmp.NetworkProfile
	if np == nil || len(np.NetworkInterfaceConfigurations) == 0 {
		return invalidParameter("networkProfile.networkInterfaceConfigurations", "A scale set needs at least one networkProfile.networkInterfaceConfigurations entry.")
	}
	primaries := 0
	for i, c := range np.NetworkInterfaceConfigurations {
		if c == nil || c.Name == nil || c.Properties == nil || len(c.Properties.IPConfigurations) == 0 {
			return invalidParameter("networkInterfaceConfigurations", "Network interface configuration %d needs a name and at least one IP configuration.", i)
		}
		n := nicPlan{
			name:         *c.Name,
			primary:      len(np.NetworkInterfaceConfigurations) == 1 || (c.Properties.Primary != nil && *c.Properties.Primary),
			ipForwarding: c.Properties.EnableIPForwarding != nil && *c.Properties.EnableIPForwarding,
			accelerated:  c.Properties.EnableAcceleratedNetworking != nil && *c.Properties.EnableAcceleratedNetworking,
		}
		if n.primary {
			primaries++
		}
		primaryIPs := 0
		for j, ipc := range c.Properties.IPConfigurations {
			if ipc == nil || ipc.Name == nil || ipc.Properties == nil || ipc.Properties.Subnet == nil || ipc.Properties.Subnet.ID == nil {
				return invalidParameter("ipConfigurations", "IP configuration %d of network interface configuration %q needs a name and properties.subnet.id.", j, n.name)
			}
			sn := s.findSubnet(*ipc.Properties.Subnet.ID)
			if sn == nil || !strings.EqualFold(sn.vnet.location, location) {
				return errReference(*ipc.Properties.Subnet.ID, id)
			}
			for _, pool := range ipc.Properties.LoadBalancerBackendAddressPools {
				if pool == nil || pool.ID == nil || s.backendPool(*pool.ID) == "" {
					return newError(http.StatusBadRequest, "InvalidResourceReference", "A backend pool referenced by %s was not found.", id)
				}
			}
			cp := ipConfigPlan{
				name:    *ipc.Name,
				primary: len(c.Properties.IPConfigurations) == 1 || (ipc.Properties.Primary != nil && *ipc.Properties.Primary),
				subnet:  sn,
			}
			if cp.primary {
				primaryIPs++
			}
			n.ipConfigs = append(n.ipConfigs, cp)
		}
		if primaryIPs != 1 {
			return invalidParameter("ipConfigurations", "Exactly one IP configuration of network interface configuration %q must be primary; %d are.", n.name, primaryIPs)
		}
		plan.nics = append(plan.nics, n)
	}
	if primaries != 1 {
		return invalidParameter("networkInterfaceConfigurations", "Exactly one network interface configuration must be primary; %d are.", primaries)
	}
	return nil
}

// findSubnet returns the subnet with the given ID; s.mu is held.
func (s *Server) findSubnet(id string) *subnet {
	i := strings.LastIndex(strings.ToLower(id), "/subnets/")
	if i < 0 {
		return nil
	}
	v := s.vnets[strings.ToLower(id[:i])]
	if v == nil {
		return nil
	}
	return v.subnets[strings.ToLower(id[i+len("/subnets/"):])]
}

// createInstances adds instances up to the plan's capacity with the model m, their NICs getting
// addresses; nothing changes when an address cannot be had. s.mu is held.
func (s *Server) createInstances(ss *scaleSet, plan *scaleSetPlan, m *armcompute.VirtualMachineScaleSet) ([]*vmInstance, *apiError) {
	live := 0
	for _, in := range ss.instances {
		if in.state != stateDeleting {
			live++
		}
	}
	var added []*vmInstance
	undo := func() {
		for _, in := range added {
			releaseAddresses(in)
		}
	}
	for n := live; n < plan.capacity; n++ {
		id := ss.nextID + len(added)
		suffix, err := winname.Suffix(id)
		if err != nil {
			undo()
			return nil, invalidParameter("sku.capacity", "instance ID %d cannot be named: %v", id, err)
		}
		in := &vmInstance{
			id: id, profile: clone(m.Properties.VirtualMachineProfile), vmID: newUUID(),
			state: stateCreating, created: time.Now().UTC(),
		}
		vmID := in.resourceID(ss)
		in.info = Instance{
			ID: vmID, ScaleSetID: ss.id, InstanceID: strconv.Itoa(id), ComputerName: plan.prefix + suffix, Linux: plan.linux,
			CustomData: bytes.Clone(plan.customData), ImageID: plan.imageID,
		}
		for _, np := range plan.nics {
			nic := instanceNIC{name: np.name, primary: np.primary, ipForwarding: np.ipForwarding, accelerated: np.accelerated, mac: macAddress()}
			for _, cp := range np.ipConfigs {
				owner := vmID + "/networkInterfaces/" + np.name + "/ipConfigurations/" + cp.name
				addr, e := allocateIP(cp.subnet, owner)
				if e != nil {
					releaseAddresses(in)
					undo()
					return nil, e
				}
				nic.ipConfigs = append(nic.ipConfigs, instanceIPConfig{name: cp.name, primary: cp.primary, subnet: cp.subnet, addr: addr})
				if np.primary && cp.primary {
					in.info.PrivateIP, in.info.IPForwarding = addr, np.ipForwarding
				}
			}
			in.nics = append(in.nics, nic)
		}
		added = append(added, in)
	}
	for _, in := range added {
		ss.instances[in.id] = in
	}
	ss.nextID += len(added)
	return added, nil
}

// scaleIn marks the instances beyond capacity for deletion, as the scale-in policy picks them
// (Default and NewestVM: highest instance IDs first; OldestVM: lowest first). s.mu is held.
func (ss *scaleSet) scaleIn(capacity int) []*vmInstance {
	var live []*vmInstance
	for _, in := range ss.sortedInstances() {
		if in.state != stateDeleting {
			live = append(live, in)
		}
	}
	if len(live) <= capacity {
		return nil
	}
	oldestFirst := false
	if sp := ss.model.Properties.ScaleInPolicy; sp != nil && len(sp.Rules) > 0 && sp.Rules[0] != nil {
		oldestFirst = *sp.Rules[0] == armcompute.VirtualMachineScaleSetScaleInRulesOldestVM
	}
	var removed []*vmInstance
	if oldestFirst {
		removed = live[:len(live)-capacity]
	} else {
		removed = live[capacity:]
	}
	for _, in := range removed {
		in.state = stateDeleting
	}
	return removed
}

// removeInstances deletes instances and frees their addresses; s.mu is held.
func (s *Server) removeInstances(ss *scaleSet, gone []*vmInstance) {
	for _, in := range gone {
		releaseAddresses(in)
		delete(ss.instances, in.id)
	}
}

func releaseAddresses(in *vmInstance) {
	for _, n := range in.nics {
		for _, c := range n.ipConfigs {
			delete(c.subnet.used, c.addr)
		}
	}
}

// bootAll boots machines in their own goroutines, unless the server is closing.
func (s *Server) bootAll(ins []*machine) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	for _, in := range ins {
		in.bootDone = make(chan struct{})
		s.boots.Add(1)
		go func(in *machine) {
			defer s.boots.Done()
			defer close(in.bootDone)
			if err := s.opts.Booter.Boot(s.ctx, in.info); err != nil {
				s.opts.Logf("booting %s (%s): %v", in.info.ComputerName, in.info.InstanceID, err)
			}
		}(in)
	}
}

// shutdownAll shuts down deleted machines whose Boot was called, once Boot returned.
func (s *Server) shutdownAll(ins []*machine) {
	for _, in := range ins {
		s.mu.Lock()
		done := in.bootDone
		s.mu.Unlock()
		if done == nil {
			continue
		}
		<-done
		if err := s.opts.Booter.Shutdown(context.Background(), in.info); err != nil {
			s.opts.Logf("shutting down %s (%s): %v", in.info.ComputerName, in.info.InstanceID, err)
		}
	}
}

func (s *Server) deleteScaleSet(w http.ResponseWriter, q *armRequest) *apiError {
	id := q.resourceID()
	s.mu.Lock()
	defer s.mu.Unlock()
	ss := s.scaleSets[strings.ToLower(id)]
	if ss == nil {
		w.WriteHeader(http.StatusNoContent)
		return nil
	}
	if op := s.busy(id); op != nil {
		return s.conflict(op, id)
	}
	gone := ss.sortedInstances()
	ss.state = stateDeleting
	for _, in := range gone {
		in.state = stateDeleting
	}
	op := s.startOperation(q, id, func(failure *apiError) func() {
		if failure != nil {
			ss.state = stateFailed
			for _, in := range gone {
				in.state = stateFailed
			}
			return nil
		}
		s.removeInstances(ss, gone)
		delete(s.scaleSets, strings.ToLower(id))
		return func() { s.shutdownAll(machinesOf(gone)) }
	})
	s.writeStarted(w, op, http.StatusAccepted, nil)
	return nil
}

func (s *Server) deleteInstances(w http.ResponseWriter, q *armRequest) *apiError {
	var req armcompute.VirtualMachineScaleSetVMInstanceRequiredIDs
	if e := decodeStrict(q.body, &req); e != nil {
		return e
	}
	if _, e := queryBool(q, "forceDeletion"); e != nil {
		return e
	}
	if len(req.InstanceIDs) == 0 {
		return invalidParameter("instanceIds", "Required parameter 'instanceIds' is missing or empty: list the instance IDs to delete.")
	}
	id := q.id(8)
	s.mu.Lock()
	defer s.mu.Unlock()
	ss, e := s.scaleSet(q)
	if e != nil {
		return e
	}
	if op := s.busy(id); op != nil {
		return s.conflict(op, id)
	}
	var gone []*vmInstance
	for _, v := range req.InstanceIDs {
		in := ss.activeInstance(v)
		if in == nil {
			return invalidParameter("instanceIds", "The provided instanceId %s is not an active Virtual Machine Scale Set VM instanceId.", deref(v))
		}
		gone = append(gone, in)
	}
	s.markDeleted(ss, gone)
	op := s.startOperation(q, id, s.commitDeletion(ss, gone))
	s.writeStarted(w, op, http.StatusAccepted, nil)
	return nil
}

func deref(v *string) string {
	if v == nil {
		return "null"
	}
	return *v
}

// activeInstance returns the instance with the decimal ID v unless it is missing or being deleted.
func (ss *scaleSet) activeInstance(v *string) *vmInstance {
	if v == nil {
		return nil
	}
	n, err := strconv.Atoi(*v)
	if err != nil {
		return nil
	}
	in := ss.instances[n]
	if in == nil || in.state == stateDeleting {
		return nil
	}
	return in
}

// markDeleted marks instances for deletion and lowers the capacity by their number; s.mu is held.
func (s *Server) markDeleted(ss *scaleSet, gone []*vmInstance) {
	for _, in := range gone {
		in.state = stateDeleting
	}
	ss.model.SKU.Capacity = to.Ptr(*ss.model.SKU.Capacity - int64(len(gone)))
}

func (s *Server) commitDeletion(ss *scaleSet, gone []*vmInstance) func(*apiError) func() {
	return func(failure *apiError) func() {
		if failure != nil {
			for _, in := range gone {
				in.state = stateFailed
			}
			return nil
		}
		s.removeInstances(ss, gone)
		return func() { s.shutdownAll(machinesOf(gone)) }
	}
}

// instance returns the instance a request addresses; s.mu is held.
func (s *Server) instance(q *armRequest) (*scaleSet, *vmInstance, *apiError) {
	ss, e := s.scaleSet(q)
	if e != nil {
		return nil, nil, e
	}
	n, err := strconv.Atoi(q.name(3))
	in := ss.instances[n]
	if err != nil || in == nil {
		return ss, nil, newError(http.StatusNotFound, "NotFound", "The entity was not found in this Azure location: instance %s of scale set %s.", q.name(3), ss.id)
	}
	return ss, in, nil
}

func (s *Server) listInstances(w http.ResponseWriter, q *armRequest) *apiError {
	if e := rejectFilter(q); e != nil {
		return e
	}
	exp, e := expand(q, "instanceView")
	if e != nil {
		return e
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	ss, e := s.scaleSet(q)
	if e != nil {
		return e
	}
	ins := ss.sortedInstances()
	start, end, next, e := s.page(q, len(ins))
	if e != nil {
		return e
	}
	res := armcompute.VirtualMachineScaleSetVMListResult{NextLink: next, Value: []*armcompute.VirtualMachineScaleSetVM{}}
	for _, in := range ins[start:end] {
		v := instanceView(ss, in, exp != "")
		res.Value = append(res.Value, &v)
	}
	writeJSON(w, http.StatusOK, res)
	return nil
}

func (s *Server) getInstance(w http.ResponseWriter, q *armRequest) *apiError {
	exp, e := expand(q, "instanceView")
	if e != nil {
		return e
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	ss, in, e := s.instance(q)
	if e != nil {
		return e
	}
	writeJSON(w, http.StatusOK, instanceView(ss, in, exp != ""))
	return nil
}

func (s *Server) deleteInstance(w http.ResponseWriter, q *armRequest) *apiError {
	s.mu.Lock()
	defer s.mu.Unlock()
	ss, in, e := s.instance(q)
	if ss != nil && in == nil {
		w.WriteHeader(http.StatusNoContent)
		return nil
	}
	if e != nil {
		return e
	}
	id := in.resourceID(ss)
	if op := s.busy(id); op != nil {
		return s.conflict(op, id)
	}
	gone := []*vmInstance{in}
	s.markDeleted(ss, gone)
	op := s.startOperation(q, id, s.commitDeletion(ss, gone))
	s.writeStarted(w, op, http.StatusAccepted, nil)
	return nil
}

// instanceView is an instance as the VMs API returns it: its own model (not the scale set's
// current one), without secrets, and the instance view on request.
func instanceView(ss *scaleSet, in *vmInstance, withInstanceView bool) armcompute.VirtualMachineScaleSetVM {
	id := in.resourceID(ss)
	p := in.profile
	osType := armcompute.OperatingSystemTypesWindows
	osp := &armcompute.OSProfile{ComputerName: to.Ptr(in.info.ComputerName)}
	if p.OSProfile != nil {
		osp.AdminUsername, osp.WindowsConfiguration, osp.LinuxConfiguration = p.OSProfile.AdminUsername, p.OSProfile.WindowsConfiguration, p.OSProfile.LinuxConfiguration
		osp.Secrets, osp.AllowExtensionOperations = p.OSProfile.Secrets, p.OSProfile.AllowExtensionOperations
		if p.OSProfile.LinuxConfiguration != nil {
			osType = armcompute.OperatingSystemTypesLinux
		}
	}
	props := &armcompute.VirtualMachineScaleSetVMProperties{
		LatestModelApplied: to.Ptr(in.modelGen == ss.modelGen),
		ProvisioningState:  to.Ptr(in.state),
		VMID:               to.Ptr(in.vmID),
		TimeCreated:        to.Ptr(in.created),
		OSProfile:          osp,
		StorageProfile: &armcompute.StorageProfile{
			ImageReference: p.StorageProfile.ImageReference,
			OSDisk:         &armcompute.OSDisk{OSType: to.Ptr(osType), CreateOption: to.Ptr(armcompute.DiskCreateOptionTypesFromImage)},
		},
		NetworkProfile:              &armcompute.NetworkProfile{},
		NetworkProfileConfiguration: &armcompute.VirtualMachineScaleSetVMNetworkProfileConfiguration{NetworkInterfaceConfigurations: p.NetworkProfile.NetworkInterfaceConfigurations},
		DiagnosticsProfile:          p.DiagnosticsProfile,
	}
	for _, n := range in.nics {
		props.NetworkProfile.NetworkInterfaces = append(props.NetworkProfile.NetworkInterfaces, &armcompute.NetworkInterfaceReference{
			ID: to.Ptr(id + "/networkInterfaces/" + n.name), Properties: &armcompute.NetworkInterfaceReferenceProperties{Primary: to.Ptr(n.primary)},
		})
	}
	if withInstanceView {
		props.InstanceView = &armcompute.VirtualMachineScaleSetVMInstanceView{ComputerName: to.Ptr(in.info.ComputerName), Statuses: instanceStatuses(in.state)}
	}
	vm := armcompute.VirtualMachineScaleSetVM{
		ID: to.Ptr(id), Name: to.Ptr(lastSegment(ss.id) + "_" + strconv.Itoa(in.id)), InstanceID: to.Ptr(strconv.Itoa(in.id)),
		Type: to.Ptr(typeScaleSetVM), Location: to.Ptr(ss.location), Properties: props,
	}
	if sku := ss.model.SKU; sku != nil {
		vm.SKU = &armcompute.SKU{Name: sku.Name, Tier: sku.Tier}
	}
	return vm
}

func instanceStatuses(state string) []*armcompute.InstanceViewStatus {
	status := func(code, display string) *armcompute.InstanceViewStatus {
		return &armcompute.InstanceViewStatus{Code: to.Ptr(code), DisplayStatus: to.Ptr(display), Level: to.Ptr(armcompute.StatusLevelTypesInfo)}
	}
	out := []*armcompute.InstanceViewStatus{status("ProvisioningState/"+strings.ToLower(state), "Provisioning "+strings.ToLower(state))}
	switch state {
	case stateSucceeded:
		out = append(out, status("PowerState/running", "VM running"))
	case stateCreating:
		out = append(out, status("PowerState/starting", "VM starting"))
	case stateDeleting:
		out = append(out, status("PowerState/stopping", "VM stopping"))
	}
	return out
}

// sameJSON reports whether two models encode to the same JSON.
func sameJSON(a, b any) bool {
	x, errA := json.Marshal(a)
	y, errB := json.Marshal(b)
	return errA == nil && errB == nil && bytes.Equal(x, y)
}

// macAddress returns a random MAC address in Azure's 00-0D-3A range.
func macAddress() string {
	u := newUUID()
	return strings.ToUpper(fmt.Sprintf("00-0D-3A-%s-%s-%s", u[0:2], u[2:4], u[4:6]))
}

// Boot diagnostics: retrieveBootDiagnosticsData hands out a SAS-like URI of the serial log,
// served by the server itself without a bearer token (as a storage blob URI with a SAS).

const blobPrefix = "/bootdiagnostics/"

type blob struct {
	scaleSet string // lower-case scale set ID, with instance; or
	instance int
	vm       string // lower-case virtual machine ID
	expires  time.Time
}

func (s *Server) retrieveBootDiagnostics(w http.ResponseWriter, q *armRequest) *apiError {
	s.mu.Lock()
	defer s.mu.Unlock()
	ss, in, e := s.instance(q)
	if e != nil {
		return e
	}
	res, e := s.serialLogURI(q, blob{scaleSet: strings.ToLower(ss.id), instance: in.id}, in.info.ComputerName)
	if e != nil {
		return e
	}
	writeJSON(w, http.StatusOK, res)
	return nil
}

// serialLogURI registers a SAS-like URI of a machine's serial log; s.mu is held.
func (s *Server) serialLogURI(q *armRequest, b blob, name string) (armcompute.RetrieveBootDiagnosticsDataResult, *apiError) {
	minutes := 120
	if v := q.r.URL.Query().Get("sasUriExpirationTimeInMinutes"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 1440 {
			return armcompute.RetrieveBootDiagnosticsDataResult{}, invalidParameter("sasUriExpirationTimeInMinutes", "sasUriExpirationTimeInMinutes=%q must be a number of minutes from 1 to 1440.", v)
		}
		minutes = n
	}
	token := strings.ReplaceAll(newUUID(), "-", "")
	b.expires = time.Now().Add(time.Duration(minutes) * time.Minute)
	s.blobs[token] = b
	uri := fmt.Sprintf("%s%s%s/%s.serialconsole.log?sv=2022-11-02&se=%s&sr=b&sp=r&sig=%s",
		s.url, blobPrefix, token, name, b.expires.UTC().Format(time.RFC3339), token)
	return armcompute.RetrieveBootDiagnosticsDataResult{SerialConsoleLogBlobURI: &uri}, nil
}

// serveBlob serves a serial log by the URI retrieveBootDiagnosticsData returned.
func (s *Server) serveBlob(w http.ResponseWriter, r *http.Request) {
	token, _, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, blobPrefix), "/")
	s.mu.Lock()
	b, ok := s.blobs[token]
	var m *machine
	if ss := s.scaleSets[b.scaleSet]; ok && ss != nil && ss.instances[b.instance] != nil {
		m = &ss.instances[b.instance].machine
	}
	if vm := s.vms[b.vm]; ok && vm != nil {
		m = &vm.machine
	}
	s.mu.Unlock()
	switch {
	case r.Method != http.MethodGet:
		storageError(w, http.StatusMethodNotAllowed, "UnsupportedHttpVerb", "The resource doesn't support specified Http Verb.")
	case !ok || time.Now().After(b.expires):
		storageError(w, http.StatusForbidden, "AuthenticationFailed", "Server failed to authenticate the request. Make sure the value of Authorization header is formed correctly including the signature.")
	case m == nil:
		storageError(w, http.StatusNotFound, "BlobNotFound", "The specified blob does not exist.")
	default:
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("x-ms-blob-type", "AppendBlob")
		_, _ = w.Write(s.opts.Booter.SerialLog(m.info))
	}
}

// storageError answers as Azure Storage does, in XML.
func storageError(w http.ResponseWriter, status int, code, message string) {
	w.Header().Set("Content-Type", "application/xml")
	w.Header().Set("x-ms-error-code", code)
	w.WriteHeader(status)
	fmt.Fprintf(w, `<?xml version="1.0" encoding="utf-8"?><Error><Code>%s</Code><Message>%s</Message></Error>`, code, message)
}

// Images.

type image struct {
	id       string
	version  bool // a gallery image version; else a managed image
	location string
	tags     map[string]string
	added    time.Time
}

var (
	managedImageID = regexp.MustCompile(`(?i)^/subscriptions/[^/]+/resourceGroups/([^/]+)/providers/Microsoft\.Compute/images/[^/]+$`)
	galleryImageID = regexp.MustCompile(`(?i)^/subscriptions/[^/]+/resourceGroups/([^/]+)/providers/Microsoft\.Compute/galleries/[^/]+/images/[^/]+/versions/([0-9]+)\.([0-9]+)\.([0-9]+)$`)
)

// AddImage seeds an image in the server's location: a managed image
// (/subscriptions/{s}/resourceGroups/{g}/providers/Microsoft.Compute/images/{name}) or a Compute
// Gallery image version (.../galleries/{g}/images/{definition}/versions/{major.minor.patch}). Its
// resource group is created when missing. Scale sets can then reference it by ID (a gallery image
// definition's ID picks its highest version), and GET returns it with tags.
func (s *Server) AddImage(id string, tags map[string]string) error {
	var group string
	version := false
	if m := galleryImageID.FindStringSubmatch(id); m != nil {
		group, version = m[1], true
	} else if m := managedImageID.FindStringSubmatch(id); m != nil {
		group = m[1]
	} else {
		return fmt.Errorf("armtest: %q is neither a managed image ID (.../providers/Microsoft.Compute/images/NAME) nor a gallery image version ID (.../galleries/G/images/I/versions/X.Y.Z)", id)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.addGroup(group)
	s.images[strings.ToLower(id)] = &image{id: id, version: version, location: s.opts.Location, tags: tags, added: time.Now().UTC()}
	return nil
}

// resolveImage returns the ID of the image a scale set references; s.mu is held.
func (s *Server) resolveImage(ref string) (string, *apiError) {
	if im := s.images[strings.ToLower(ref)]; im != nil {
		return im.id, nil
	}
	var best *image
	var bestVersion [3]int
	prefix := strings.ToLower(ref) + "/versions/"
	for key, im := range s.images {
		if !im.version || !strings.HasPrefix(key, prefix) {
			continue
		}
		m := galleryImageID.FindStringSubmatch(im.id)
		var v [3]int
		for i := range v {
			v[i], _ = strconv.Atoi(m[2+i])
		}
		if best == nil || v[0] > bestVersion[0] || v[0] == bestVersion[0] && (v[1] > bestVersion[1] || v[1] == bestVersion[1] && v[2] > bestVersion[2]) {
			best, bestVersion = im, v
		}
	}
	if best == nil {
		return "", newError(http.StatusNotFound, "NotFound", "The Image '%s' cannot be found in '%s' region.", ref, s.opts.Location)
	}
	return best.id, nil
}

func (s *Server) getImage(w http.ResponseWriter, q *armRequest) *apiError {
	s.mu.Lock()
	im := s.images[strings.ToLower(q.resourceID())]
	s.mu.Unlock()
	if im == nil {
		return errResourceNotFound(q.route.typ, q.templateName(), q.group)
	}
	tags := map[string]*string{}
	for k, v := range im.tags {
		tags[k] = to.Ptr(v)
	}
	if !im.version {
		writeJSON(w, http.StatusOK, armcompute.Image{
			ID: to.Ptr(im.id), Name: to.Ptr(lastSegment(im.id)), Type: to.Ptr(typeImage), Location: to.Ptr(im.location), Tags: tags,
			Properties: &armcompute.ImageProperties{
				ProvisioningState: to.Ptr(stateSucceeded),
				HyperVGeneration:  to.Ptr(armcompute.HyperVGenerationTypesV2),
				StorageProfile: &armcompute.ImageStorageProfile{OSDisk: &armcompute.ImageOSDisk{
					OSType: to.Ptr(armcompute.OperatingSystemTypesWindows), OSState: to.Ptr(armcompute.OperatingSystemStateTypesGeneralized),
				}},
			},
		})
		return nil
	}
	writeJSON(w, http.StatusOK, armcompute.GalleryImageVersion{
		ID: to.Ptr(im.id), Name: to.Ptr(lastSegment(im.id)), Type: to.Ptr(typeImageVersion), Location: to.Ptr(im.location), Tags: tags,
		Properties: &armcompute.GalleryImageVersionProperties{
			ProvisioningState: to.Ptr(armcompute.GalleryProvisioningStateSucceeded),
			PublishingProfile: &armcompute.GalleryImageVersionPublishingProfile{
				PublishedDate: to.Ptr(im.added),
				TargetRegions: []*armcompute.TargetRegion{{Name: to.Ptr(im.location), RegionalReplicaCount: to.Ptr[int32](1)}},
			},
			StorageProfile: &armcompute.GalleryImageVersionStorageProfile{
				OSDiskImage: &armcompute.GalleryOSDiskImage{HostCaching: to.Ptr(armcompute.HostCachingReadWrite)},
			},
		},
	})
	return nil
}
