package tfregistry_test

import (
	"archive/zip"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/dirhash"
	"sigs.k8s.io/yaml"

	"github.com/kubewin/kubewin/internal/testkit/testenv"
	"github.com/kubewin/kubewin/internal/testkit/tfregistry"
)

// providerRelease is a snapshot release of the provider for this machine's platform.
type providerRelease struct {
	dir      string // goreleaser's dist directory
	version  string
	prefix   string // terraform-provider-kubewin_<version>_
	archive  string // the .zip's file name
	zipHash  string // zh: hash of the archive, as lock files record it
	dirHash  string // h1: hash of its content
	platform string // <os>_<arch>
}

func (r providerRelease) path(suffix string) string { return filepath.Join(r.dir, r.prefix+suffix) }

// binary is the name of the provider's executable in the archive.
func (r providerRelease) binary() string {
	if runtime.GOOS == "windows" {
		return "terraform-provider-kubewin_v" + r.version + ".exe"
	}
	return "terraform-provider-kubewin_v" + r.version
}

// installed is where init in dir unpacks the release when served as host/namespace/kubewin.
func (r providerRelease) installed(dir, host, namespace string) string {
	return filepath.Join(dir, ".terraform", "providers", host, namespace, "kubewin", r.version, r.platform)
}

// buildRelease runs `goreleaser release --snapshot` with the repository's .goreleaser.yml,
// limited to this machine's platform and writing into a temporary directory, and signing with
// key, and checks that it produced the files a provider registry takes in.
func buildRelease(t *testing.T, keyring *tfregistry.Keyring, key tfregistry.Key) providerRelease {
	t.Helper()
	goreleaser := testenv.MustBinary(t, "goreleaser")
	root, err := filepath.Abs("../../..")
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(root, ".goreleaser.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var conf map[string]any
	if err := yaml.Unmarshal(raw, &conf); err != nil {
		t.Fatal(err)
	}
	tmp := t.TempDir()
	conf["dist"] = filepath.Join(tmp, "dist")
	builds, _ := conf["builds"].([]any)
	if len(builds) == 0 {
		t.Fatal(".goreleaser.yml has no builds")
	}
	for _, b := range builds {
		build, ok := b.(map[string]any)
		if !ok {
			t.Fatalf(".goreleaser.yml: a build is %v, not a map", b)
		}
		build["goos"] = []string{runtime.GOOS}
		build["goarch"] = []string{runtime.GOARCH}
	}
	derived, err := yaml.Marshal(conf)
	if err != nil {
		t.Fatal(err)
	}
	config := filepath.Join(tmp, "goreleaser.yml")
	if err := os.WriteFile(config, derived, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(goreleaser, "release", "--snapshot", "--clean", "--config", config)
	cmd.Dir = root
	cmd.Env = append(keyring.Env(), "GPG_FINGERPRINT="+key.Fingerprint)
	start := time.Now()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("goreleaser release --snapshot: %v\n%s", err, out)
	}
	t.Logf("goreleaser release --snapshot for %s/%s: %s", runtime.GOOS, runtime.GOARCH, time.Since(start).Round(time.Millisecond))

	dist, ok := conf["dist"].(string)
	if !ok {
		t.Fatalf(".goreleaser.yml: dist is %v, not a string", conf["dist"])
	}
	r := providerRelease{dir: dist, platform: runtime.GOOS + "_" + runtime.GOARCH}
	sums, _ := filepath.Glob(filepath.Join(r.dir, "terraform-provider-kubewin_*_SHA256SUMS"))
	if len(sums) != 1 {
		t.Fatalf("goreleaser wrote %d terraform-provider-kubewin_<version>_SHA256SUMS files, want 1:\n%s", len(sums), out)
	}
	r.prefix = strings.TrimSuffix(filepath.Base(sums[0]), "SHA256SUMS")
	r.version = strings.TrimSuffix(strings.TrimPrefix(r.prefix, "terraform-provider-kubewin_"), "_")
	r.archive = r.prefix + r.platform + ".zip"
	publishExtraFiles(t, conf, root, r)
	for _, f := range []string{r.platform + ".zip", "SHA256SUMS.sig", "manifest.json"} {
		if _, err := os.Stat(r.path(f)); err != nil {
			t.Fatalf("the release lacks %s: %v", r.prefix+f, err)
		}
	}
	zipSum := fileSHA256(t, r.path(r.platform+".zip"))
	r.zipHash = "zh:" + zipSum
	if r.dirHash, err = dirhash.HashZip(r.path(r.platform+".zip"), dirhash.Hash1); err != nil {
		t.Fatal(err)
	}
	// The archive and the manifest, and not the signature (goreleaser v2.15.0 and v2.15.1 added
	// it after signing, which invalidated the signature: goreleaser issues 6508 and 6514).
	wantSums := fmt.Sprintf("%s  %s\n%s  %s\n", zipSum, r.archive, fileSHA256(t, r.path("manifest.json")), r.prefix+"manifest.json")
	if got, _ := os.ReadFile(sums[0]); !sameLines(string(got), wantSums) {
		t.Errorf("%s is\n%s\nwant\n%s", filepath.Base(sums[0]), got, wantSums)
	}
	z, err := zip.OpenReader(r.path(r.platform + ".zip"))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = z.Close() }()
	binary := r.binary()
	var names []string
	for _, f := range z.File {
		names = append(names, f.Name)
	}
	if !slices.Contains(names, binary) {
		t.Errorf("%s holds %v, want %s", r.archive, names, binary)
	}
	return r
}

// publishExtraFiles copies the files that the configuration's release.extra_files uploads
// next to the built ones (the registry manifest), as publishing does: a snapshot publishes
// nothing.
func publishExtraFiles(t *testing.T, conf map[string]any, root string, r providerRelease) {
	t.Helper()
	release, _ := conf["release"].(map[string]any)
	extra, _ := release["extra_files"].([]any)
	project, ok := conf["project_name"].(string)
	if !ok {
		t.Fatalf(".goreleaser.yml: project_name is %v, not a string", conf["project_name"])
	}
	name := strings.NewReplacer("{{ .ProjectName }}", project, "{{ .Version }}", r.version)
	for _, e := range extra {
		e, _ := e.(map[string]any)
		glob, _ := e["glob"].(string)
		tmpl, _ := e["name_template"].(string)
		data, err := os.ReadFile(filepath.Join(root, glob))
		if err != nil {
			t.Fatalf("release.extra_files: %v", err)
		}
		if err := os.WriteFile(filepath.Join(r.dir, name.Replace(tmpl)), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func fileSHA256(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

func sameLines(a, b string) bool {
	la, lb := strings.Split(strings.TrimSpace(a), "\n"), strings.Split(strings.TrimSpace(b), "\n")
	slices.Sort(la)
	slices.Sort(lb)
	return slices.Equal(la, lb)
}

// variant copies the release's registry files into a new directory, where a test changes one.
func (r providerRelease) variant(t *testing.T) providerRelease {
	t.Helper()
	v := r
	v.dir = t.TempDir()
	for _, f := range []string{r.platform + ".zip", "SHA256SUMS", "SHA256SUMS.sig", "manifest.json"} {
		data, err := os.ReadFile(r.path(f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(v.path(f), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return v
}

// flipByte inverts one byte of a file, at a fraction of its length (1: the last byte).
func flipByte(t *testing.T, path string, at float64) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	data[min(int(at*float64(len(data))), len(data)-1)] ^= 0xff
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// cli runs terraform or tofu with nothing of the user's setup: an empty CLI configuration (no
// provider_installation, so the origin registry is asked), an empty home (no implicit local
// mirrors, no plugin cache) and the registry's CA as the only extra trust.
type cli struct {
	name, bin string
	env       []string
}

func newCLI(t *testing.T, name string, reg *tfregistry.Registry) *cli {
	t.Helper()
	home := t.TempDir()
	conf := filepath.Join(home, "cli.tfrc")
	if err := os.WriteFile(conf, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	return &cli{name: name, bin: testenv.MustBinary(t, name), env: []string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + home,
		"XDG_CONFIG_HOME=" + filepath.Join(home, ".config"),
		"XDG_DATA_HOME=" + filepath.Join(home, ".local", "share"),
		"XDG_CACHE_HOME=" + filepath.Join(home, ".cache"),
		"TF_CLI_CONFIG_FILE=" + conf,
		"TOFU_CLI_CONFIG_FILE=" + conf,
		"SSL_CERT_FILE=" + reg.CAFile,
		"CHECKPOINT_DISABLE=1",
	}}
}

// workdir writes a configuration requiring source at version.
func workdir(t *testing.T, source, version string) string {
	t.Helper()
	dir := t.TempDir()
	conf := fmt.Sprintf(`terraform {
  required_providers {
    kubewin = {
      source  = %q
      version = %q
    }
  }
}
`, source, version)
	if err := os.WriteFile(filepath.Join(dir, "main.tf"), []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// run runs the CLI in dir and returns its output with runs of white space made single spaces
// (diagnostics are wrapped).
func (c *cli) run(t *testing.T, dir string, args ...string) (string, string, error) {
	t.Helper()
	cmd := exec.Command(c.bin, append([]string{"-chdir=" + dir}, args...)...)
	cmd.Env = c.env
	out, err := cmd.CombinedOutput()
	return strings.Join(strings.Fields(string(out)), " "), string(out), err
}

// checkLock checks that the dependency lock file in dir records the release's version and
// hashes for source.
func checkLock(t *testing.T, dir, source string, r providerRelease) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, ".terraform.lock.hcl"))
	if err != nil {
		t.Fatalf("no lock file: %v", err)
	}
	lock := string(data)
	for _, want := range []string{fmt.Sprintf("provider %q {", source), fmt.Sprintf("%q", r.zipHash), fmt.Sprintf("%q", r.dirHash)} {
		if !strings.Contains(lock, want) {
			t.Errorf("the lock file lacks %s:\n%s", want, lock)
		}
	}
	if !regexp.MustCompile(`version\s+= "` + regexp.QuoteMeta(r.version) + `"`).MatchString(lock) {
		t.Errorf("the lock file does not record version %s:\n%s", r.version, lock)
	}
}

// TestProviderInstall builds the provider's release with goreleaser and .goreleaser.yml (a
// snapshot, for this platform), signs it with a throwaway GPG key, serves it on 127.0.0.1
// through the provider registry protocol and installs it with the real terraform and tofu, as
// users do with `terraform init`: init verifies the signature, records the hashes in the lock
// file and installs a provider that runs; `providers lock` records the hashes; a tampered
// archive, a signature by another key and a corrupted signature each fail init.
func TestProviderInstall(t *testing.T) {
	for _, name := range []string{"terraform", "tofu"} { // fail early when one is missing
		testenv.MustBinary(t, name)
	}
	keyring := tfregistry.NewKeyring(t)
	key := keyring.Generate(t, "kubewin release test", "release-test@kubewin.invalid")
	other := keyring.Generate(t, "another publisher", "another@kubewin.invalid")
	rel := buildRelease(t, keyring, key)

	// The same release, altered after signing: one byte in the middle of the archive, the
	// checksums signed by a key the registry does not advertise, one byte of the signature.
	tampered := rel.variant(t)
	flipByte(t, tampered.path(rel.platform+".zip"), 0.5)
	tamperedHash := "zh:" + fileSHA256(t, tampered.path(rel.platform+".zip"))
	otherKey := rel.variant(t)
	keyring.Sign(t, other, otherKey.path("SHA256SUMS"), otherKey.path("SHA256SUMS.sig"))
	corrupted := rel.variant(t)
	flipByte(t, corrupted.path("SHA256SUMS.sig"), 1) // the signature value's last byte

	for _, c := range []struct {
		name, signed string
		// The errors init reports, per release namespace.
		tampered, otherKey, corrupted string
	}{
		{
			name: "terraform", signed: "self-signed",
			tampered:  fmt.Sprintf("archive has incorrect checksum %s (expected %s)", tamperedHash, rel.zipHash),
			otherKey:  "authentication signature from unknown issuer",
			corrupted: "error checking signature: openpgp: invalid signature: RSA verification failure",
		},
		{
			name: "tofu", signed: "signed",
			tampered: fmt.Sprintf("archive has incorrect checksum %s (expected %s)", tamperedHash, rel.zipHash),
			otherKey: "the provider is not signed with a valid signing key; please contact the provider author (authentication signature from " +
				"unknown issuer)",
			corrupted: "the provider is not signed with a valid signing key; please contact the provider author (error checking signature: openpgp: invalid " +
				"signature: RSA verification failure)",
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			reg := tfregistry.Serve(t)
			for ns, r := range map[string]providerRelease{"kubewin": rel, "tampered": tampered, "otherkey": otherKey, "corrupted": corrupted} {
				if err := reg.Publish(ns, "kubewin", r.dir, key.Advertised); err != nil {
					t.Fatal(err)
				}
			}
			cli := newCLI(t, c.name, reg)
			source := reg.Source("kubewin", "kubewin")

			dir := workdir(t, source, rel.version)
			start := time.Now()
			out, raw, err := cli.run(t, dir, "init", "-input=false", "-no-color")
			if err != nil {
				t.Fatalf("%s init: %v\n%s", c.name, err, raw)
			}
			t.Logf("%s init from the registry: %s", c.name, time.Since(start).Round(time.Millisecond))
			installed := fmt.Sprintf("- Installed %s v%s (%s, key ID %s)", source, rel.version, c.signed, key.Advertised.KeyID)
			if !strings.Contains(out, installed) {
				t.Errorf("%s init does not say %q:\n%s", c.name, installed, raw)
			}
			files := "/files/kubewin/kubewin/" + rel.version + "/" + rel.prefix
			for _, want := range []string{
				"/.well-known/terraform.json",
				"/v1/providers/kubewin/kubewin/versions",
				"/v1/providers/kubewin/kubewin/" + rel.version + "/download/" + runtime.GOOS + "/" + runtime.GOARCH,
				files + "SHA256SUMS", files + "SHA256SUMS.sig", files + rel.platform + ".zip",
			} {
				if !slices.Contains(reg.Requests(), want) {
					t.Errorf("%s init did not ask the registry for %s; it asked for %v", c.name, want, reg.Requests())
				}
			}
			if _, err := os.Stat(filepath.Join(rel.installed(dir, reg.Host, "kubewin"), rel.binary())); err != nil {
				t.Errorf("%s init installed no provider executable: %v", c.name, err)
			}
			checkLock(t, dir, source, rel)
			// The installed provider runs and serves kubewin's schema.
			out, raw, err = cli.run(t, dir, "providers", "schema", "-json")
			if err != nil || !strings.Contains(out, `"kubewin_windows_node_pool"`) {
				t.Errorf("%s providers schema: %v\n%.2000s", c.name, err, raw)
			}

			lockDir := workdir(t, source, rel.version)
			out, raw, err = cli.run(t, lockDir, "providers", "lock", "-no-color", "-platform="+rel.platform)
			if err != nil {
				t.Fatalf("%s providers lock: %v\n%s", c.name, err, raw)
			}
			retrieved := fmt.Sprintf("- Retrieved %s %s for %s (%s, key ID %s)", source, rel.version, rel.platform, c.signed, key.Advertised.KeyID)
			if !strings.Contains(out, retrieved) {
				t.Errorf("%s providers lock does not say %q:\n%s", c.name, retrieved, raw)
			}
			checkLock(t, lockDir, source, rel)

			for _, bad := range []struct{ namespace, want string }{
				{"tampered", c.tampered}, {"otherkey", c.otherKey}, {"corrupted", c.corrupted},
			} {
				source := reg.Source(bad.namespace, "kubewin")
				dir := workdir(t, source, rel.version)
				out, raw, err := cli.run(t, dir, "init", "-input=false", "-no-color")
				if err == nil {
					t.Errorf("%s init installed the %s release:\n%s", c.name, bad.namespace, raw)
					continue
				}
				t.Logf("%s init, %s release: %s", c.name, bad.namespace, out[max(strings.Index(out, "Error:"), 0):])
				if !strings.Contains(out, bad.want) {
					t.Errorf("%s init, %s release: the output lacks %q:\n%s", c.name, bad.namespace, bad.want, raw)
				}
				// (tofu leaves its installation lock file next to where the package would be.)
				if _, err := os.Stat(rel.installed(dir, reg.Host, bad.namespace)); !os.IsNotExist(err) {
					t.Errorf("%s init left the %s release installed (%v)", c.name, bad.namespace, err)
				}
				if _, err := os.Stat(filepath.Join(dir, ".terraform.lock.hcl")); !os.IsNotExist(err) {
					t.Errorf("%s init wrote a lock file for the %s release (%v)", c.name, bad.namespace, err)
				}
			}
		})
	}
}
