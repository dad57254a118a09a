package armtest

import (
	"encoding/base64"
	"regexp"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v6"
	"github.com/kubewin/kubewin/internal/winname"
)

// The OS profile of scale sets and virtual machines: computer names, the administrator account,
// custom data.

// Limits Compute enforces.
const (
	maxCustomData       = 65535 // bytes, decoded (osProfile.customData; 87380 base64 characters)
	maxCapacity         = 1000  // instances of a Uniform scale set with a single placement group off
	maxWindowsPrefix    = winname.MaxPrefix
	maxLinuxPrefix      = 58
	maxWindowsAdminName = 20
)

var (
	prefixChars      = regexp.MustCompile(`^[A-Za-z0-9-]+$`)
	allDigits        = regexp.MustCompile(`^[0-9]+$`)
	disallowedAdmins = strings.Fields("administrator admin user user1 test user2 test1 user3 admin1 1 123 a actuser adm admin2 aspnet backup " +
		"console david guest john owner root server sql support support_388945a0 sys test2 test3 user4 user5")
	disallowedPassword = []string{"abc@123", "P@$$w0rd", "P@ssw0rd", "P@ssword123", "Pa$$word", "pass@word1", "Password!", "Password1", "Password22",
		"iloveyou!"}
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
			"computerNamePrefix %q is %d characters long; it must be 1 to %d characters (Windows computer names hold 15 characters, of which the "+
				"instance suffix takes 6).", prefix, len(prefix), maxPrefix)
	case !prefixChars.MatchString(prefix) || allDigits.MatchString(prefix):
		return invalidParameter("computerNamePrefix", "computerNamePrefix %q may hold only letters, digits and '-', and cannot be entirely numeric.",
			prefix)
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
					return invalidParameter("linuxConfiguration.ssh.publicKeys",
						"An SSH public key needs keyData (an OpenSSH public key, \"ssh-ed25519 AAAA...\") and path.")
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
			return invalidParameter("adminPassword",
				"Required parameter 'adminPassword' is missing (null): give one, or disable password authentication and give an SSH key.")
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
			"The supplied password must be between 8-123 characters long and must satisfy at least 3 of password complexity requirements from the "+
				"following: 1) Contains an uppercase character 2) Contains a lowercase character 3) Contains a numeric digit 4) Contains a special "+
				"character 5) Control characters are not allowed")
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
