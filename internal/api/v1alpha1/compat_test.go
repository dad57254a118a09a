package v1alpha1

import (
	"strings"
	"testing"
)

func TestCheckImageBuild(t *testing.T) {
	for _, tc := range []struct {
		host      WindowsBuild
		osVersion string
		hyperV    bool
		// want is a part of the error; "" accepts the image.
		want string
	}{
		{WindowsServer2022, "10.0.20348.2849", false, ""},
		{WindowsServer2022, "10.0.20348", false, ""},
		{WindowsServer2022, "10.0.20348.2849", true, ""},
		// Process isolation: the image's build must be the host's, older or newer.
		{WindowsServer2025, "10.0.20348.2849", false, "the image is for Windows build 20348 (os.version 10.0.20348.2849), the host runs build " +
			"26100 (Windows Server 2025): a process-isolated container must match the host's build (HCS_E_IMAGE_MISMATCH); use the image's " +
			"variant for build 26100"},
		{WindowsServer2019, "10.0.20348.1", false, "must match the host's build"},
		// Hyper-V isolation: down-level images run, up-level ones do not.
		{WindowsServer2025, "10.0.17763.6532", true, ""},
		{WindowsServer2025, "10.0.20348.1", true, ""},
		{WindowsServer2022, "10.0.26100.1", true, "newer than the host's build 20348 (Windows Server 2022): Hyper-V isolation runs images of " +
			"the host's build or older"},
		// Builds kubewin nodes do not run, and what is no Windows version at all.
		{WindowsServer2022, "10.0.19041.1", false, "os.version 10.0.19041.1 is Windows build 19041, which kubewin nodes do not run"},
		{WindowsServer2025, "10.0.19041.1", true, "which kubewin nodes do not run: use the image's variant for Windows Server 2019 (17763), " +
			"2022 (20348) or 2025 (26100)"},
		{WindowsServer2022, "", false, `os.version "" is not a Windows version`},
		{WindowsServer2022, "6.3.9600.1", false, "is not a Windows version"},
		{WindowsServer2022, "10.0.x.1", false, "is not a Windows version"},
		{WindowsServer2022, "10.0.20348.1.5", false, "is not a Windows version"},
		{WindowsServer2022, "20348", false, "is not a Windows version"},
	} {
		err := CheckImageBuild(tc.host, tc.osVersion, tc.hyperV)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("CheckImageBuild(%d, %q, %v): %v", tc.host, tc.osVersion, tc.hyperV, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("CheckImageBuild(%d, %q, %v) = %v, want an error with %q", tc.host, tc.osVersion, tc.hyperV, err, tc.want)
		}
	}
}
