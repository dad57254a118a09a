package windows

// Native returns the platform of the machine nodeboot runs on. Its instance metadata service is
// Azure's IMDS, "at a well-known, non-routable IP address (169.254.169.254)"
// (https://learn.microsoft.com/en-us/azure/virtual-machines/instance-metadata-service); a machine
// not on Azure does not answer there.
func Native() *Platform {
	p := New(Backends{HNS: hnsAPI{}, SCM: scmAPI{}, Shell: powerShell{}, Files: ntfs{}, System: system{}})
	p.Metadata = "http://169.254.169.254"
	return p
}
