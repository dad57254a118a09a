package azure

import (
	"regexp"
	"strings"
)

// NestedVirtualization is what Azure documents of a VM size's series and nested
// virtualization, which Hyper-V isolated containers need on a virtual machine ("If a Windows
// container host will be run from a Hyper-V virtual machine, and will also be hosting Hyper-V
// isolation, nested virtualization will need to be enabled": MicrosoftDocs/Virtualization-
// Documentation, windowscontainers/deploy-containers/system-requirements.md).
type NestedVirtualization int

const (
	// NestedUnknown: the size is not in nestedBySeries; nothing can be said at plan time.
	NestedUnknown NestedVirtualization = iota
	NestedSupported
	NestedNotSupported
)

// nestedBySeries is the "Nested Virtualization" line of each series' page in Azure's size
// documentation, keyed by the series as a size name spells it (family, features, version, lower
// case: Standard_D4s_v5 is dsv5). Sources, MicrosoftDocs/azure-compute-docs
// articles/virtual-machines/sizes/general-purpose/: dsv5-series.md, dasv5-series.md,
// dsv6-series.md, dasv6-series.md ("Supported"); dsv2-series.md, bsv2-series.md ("Not
// Supported"); MicrosoftDocs/azure-docs articles/virtual-machines/dav4-dasv4-series.md ("Not
// Supported") and acu.md, whose "***" marks the families "Hyper-threaded and capable of running
// nested virtualization" (D_v3, Ds_v3, Dv4, Dsv4, Ddv4, Ddsv4, E_v3, Es_v3, Ev4, Esv4, Edv4,
// Edsv4, Fsv2). A series not listed is NestedUnknown, never guessed.
var nestedBySeries = map[string]NestedVirtualization{
	"dv3": NestedSupported, "dsv3": NestedSupported, "ev3": NestedSupported, "esv3": NestedSupported,
	"dv4": NestedSupported, "dsv4": NestedSupported, "ddv4": NestedSupported, "ddsv4": NestedSupported,
	"ev4": NestedSupported, "esv4": NestedSupported, "edv4": NestedSupported, "edsv4": NestedSupported,
	"fsv2": NestedSupported, "dsv5": NestedSupported, "dasv5": NestedSupported, "dsv6": NestedSupported, "dasv6": NestedSupported,
	"dv2": NestedNotSupported, "dsv2": NestedNotSupported, "dav4": NestedNotSupported, "dasv4": NestedNotSupported,
	// Bsv2's sizes: B2ts_v2, B2ls_v2, B2s_v2 and up.
	"bsv2": NestedNotSupported, "btsv2": NestedNotSupported, "blsv2": NestedNotSupported,
}

// sizeRE reads a size name: family (upper case), vCPUs, an optional constrained vCPU count,
// feature letters (lower case) and the version (Standard_E16-4ds_v4: E, 16, -4, ds, 4).
var sizeRE = regexp.MustCompile(`^Standard_([A-Z]+)[0-9]+(?:-[0-9]+)?([a-z]*)(?:_v([0-9]+))?$`)

// SizeSeries is the series of a VM size as nestedBySeries keys it ("dsv5"), or "" when the name
// is not an Azure size name. A size without a version is of version 1 (Standard_D4 is dv1).
func SizeSeries(size string) string {
	m := sizeRE.FindStringSubmatch(size)
	if m == nil {
		return ""
	}
	version := m[3]
	if version == "" {
		version = "1"
	}
	return strings.ToLower(m[1]+m[2]) + "v" + version
}

// NestedVirtualizationOf says what Azure documents of the size's nested virtualization.
func NestedVirtualizationOf(size string) NestedVirtualization {
	return nestedBySeries[SizeSeries(size)]
}
