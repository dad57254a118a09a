package winname

import (
	"strings"
	"testing"
)

func TestComputerName(t *testing.T) {
	tests := []struct {
		prefix string
		index  int
		want   string
	}{
		{"win", 0, "win000000"},
		{"win", 35, "win00000z"},
		{"win", 36, "win000010"},
		{"winpool01", MaxIndex, "winpool01zzzzzz"},
	}
	for _, tt := range tests {
		got, err := ComputerName(tt.prefix, tt.index)
		if err != nil || got != tt.want {
			t.Errorf("ComputerName(%q, %d) = %q, %v; want %q", tt.prefix, tt.index, got, err, tt.want)
		}
		if len(got) > MaxComputerName {
			t.Errorf("%q is longer than %d", got, MaxComputerName)
		}
		if i, ok := Index(tt.prefix, got); !ok || i != tt.index {
			t.Errorf("Index(%q, %q) = %d, %v", tt.prefix, got, i, ok)
		}
	}
}

func TestComputerNameErrors(t *testing.T) {
	tests := []struct {
		prefix  string
		index   int
		wantErr string
	}{
		{"windowspool", 0, `node name prefix "windowspool" makes Windows computer names of 17 characters`},
		{"windowspool", 0, `e.g. "windowspo"`},
		{"Win", 0, "must be lower-case"},
		{"1win", 0, "starting with a letter"},
		{"", 0, "must not be empty"},
		{"win", -1, "out of range"},
		{"win", MaxIndex + 1, "out of range"},
	}
	for _, tt := range tests {
		_, err := ComputerName(tt.prefix, tt.index)
		if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
			t.Errorf("ComputerName(%q, %d) error = %v, want %q", tt.prefix, tt.index, err, tt.wantErr)
		}
	}
}

func TestValidatePoolName(t *testing.T) {
	for _, ok := range []string{"win", "win-2022", "a"} {
		if err := ValidatePoolName(ok); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
	for _, bad := range []string{"", "Win", "win-", "-win", "2022", "win_pool", strings.Repeat("a", 64)} {
		if err := ValidatePoolName(bad); err == nil {
			t.Errorf("%q: want an error", bad)
		}
	}
	if _, ok := Index("win", "other000001"); ok {
		t.Error("Index matched a name with another prefix")
	}
}
