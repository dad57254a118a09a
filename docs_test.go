package kubewin_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// verifiedLine starts the line of a documentation page that says what of the behaviour it
// describes has been verified, and how.
const verifiedLine = "**Verified so far:**"

// Every page the registries show — the provider's docs/ and the Packer plugin's docs, as written
// and as generated — covers azure or Windows behaviour, so each says what has been verified.
func TestDocsSayWhatIsVerified(t *testing.T) {
	pages := 0
	for _, root := range []string{"docs", "packer/packer-plugin-kubewin/docs", "packer/packer-plugin-kubewin/.web-docs"} {
		err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || (filepath.Ext(p) != ".md" && filepath.Ext(p) != ".mdx") {
				return err
			}
			pages++
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			if !strings.Contains(string(data), verifiedLine) {
				t.Errorf("%s does not say what has been verified: it needs a %q line (templates/, the schema's descriptions, "+
					"hack/errdocs or the Packer plugin's docs; then make generate)", p, verifiedLine)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if pages < 15 {
		t.Fatalf("found %d pages: the walk is broken", pages)
	}
}
