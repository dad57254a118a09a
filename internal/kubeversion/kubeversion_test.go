package kubeversion

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/version"
)

func TestCheckSkew(t *testing.T) {
	tests := []struct {
		node, server string
		wantErr      string
	}{
		{"v1.36.2", "v1.36.0", ""},
		{"v1.34.1", "v1.37.0", ""},
		{"v1.37.0", "v1.36.9", "newer than the control plane"},
		{"v1.33.0", "v1.37.0", "more than 3 minors older"},
	}
	for _, tt := range tests {
		t.Run(tt.node+"/"+tt.server, func(t *testing.T) {
			err := CheckSkew(mustParse(t, tt.node), mustParse(t, tt.server))
			if tt.wantErr == "" && err != nil {
				t.Fatalf("unexpected error: %v", err)
			}
			if tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Fatalf("error = %v, want it to contain %q", err, tt.wantErr)
			}
		})
	}
}

func TestCheckSupported(t *testing.T) {
	for _, s := range []string{"v1.34.0", "1.35.4", "v1.37.1"} {
		if err := CheckSupported(mustParse(t, s)); err != nil {
			t.Errorf("%s: %v", s, err)
		}
	}
	for _, s := range []string{"v1.33.9", "v1.38.0", "v2.0.0"} {
		if err := CheckSupported(mustParse(t, s)); err == nil {
			t.Errorf("%s: want an error", s)
		}
	}
	if _, err := Parse("1.36"); err == nil {
		t.Error("Parse(\"1.36\") accepted a version without a patch number")
	}
	if got := strings.Join(Supported(), ","); got != "1.34,1.35,1.36,1.37" {
		t.Errorf("Supported() = %s", got)
	}
}

func mustParse(t *testing.T, s string) *version.Version {
	t.Helper()
	v, err := Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return v
}
