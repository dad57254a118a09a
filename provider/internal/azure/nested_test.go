package azure

import "testing"

// The nested virtualization rule, size by size: the series a size name belongs to, and what
// Azure documents of it (nested.go cites the pages).
func TestNestedVirtualizationOf(t *testing.T) {
	for _, tc := range []struct {
		size, series string
		want         NestedVirtualization
	}{
		{"Standard_D4s_v3", "dsv3", NestedSupported},
		{"Standard_D2_v3", "dv3", NestedSupported},
		{"Standard_E16-4s_v3", "esv3", NestedSupported}, // constrained vCPUs
		{"Standard_E8ds_v4", "edsv4", NestedSupported},
		{"Standard_F8s_v2", "fsv2", NestedSupported},
		{"Standard_D4s_v5", "dsv5", NestedSupported},
		{"Standard_D4as_v5", "dasv5", NestedSupported},
		{"Standard_D8s_v6", "dsv6", NestedSupported},
		{"Standard_D2as_v6", "dasv6", NestedSupported},
		{"Standard_DS2_v2", "dsv2", NestedNotSupported},
		{"Standard_D3_v2", "dv2", NestedNotSupported},
		{"Standard_D4as_v4", "dasv4", NestedNotSupported},
		{"Standard_D4a_v4", "dav4", NestedNotSupported},
		{"Standard_B2s_v2", "bsv2", NestedNotSupported},
		{"Standard_B2ts_v2", "btsv2", NestedNotSupported},
		{"Standard_B2ms", "bmsv1", NestedUnknown}, // B v1: its page was not read; never guessed
		{"Standard_D4ds_v5", "ddsv5", NestedUnknown},
		{"Standard_NC6", "ncv1", NestedUnknown},
		{"standard_d4s_v5", "", NestedUnknown},
		{"D4s_v5", "", NestedUnknown},
		{"", "", NestedUnknown},
	} {
		if got := SizeSeries(tc.size); got != tc.series {
			t.Errorf("SizeSeries(%q) = %q, want %q", tc.size, got, tc.series)
		}
		if got := NestedVirtualizationOf(tc.size); got != tc.want {
			t.Errorf("NestedVirtualizationOf(%q) = %v, want %v", tc.size, got, tc.want)
		}
	}
}
