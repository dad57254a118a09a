package windows

// Native returns the platform of the machine nodeboot runs on.
func Native() *Platform {
	return New(Backends{HNS: hnsAPI{}, SCM: scmAPI{}, Shell: powerShell{}, Files: ntfs{}, System: system{}})
}
