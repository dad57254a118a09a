package tfregistry

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// Keyring is a throwaway GnuPG home directory whose keys have no passphrase, run with the
// system's gpg (Debian's gnupg).
type Keyring struct {
	// Home is the GNUPGHOME directory.
	Home string
	gpg  string
}

// Key is a signing key of a Keyring.
type Key struct {
	// Fingerprint is the key's full fingerprint, which goreleaser's signing step takes as
	// GPG_FINGERPRINT.
	Fingerprint string
	// Advertised is the public key as a registry advertises it.
	Advertised SigningKey
}

// NewKeyring makes an empty keyring; it is removed, and its gpg-agent stopped, when the test
// ends. A missing gpg fails the test.
func NewKeyring(t testing.TB) *Keyring {
	t.Helper()
	gpg, err := exec.LookPath("gpg")
	if err != nil {
		t.Fatalf("gpg is missing: install Debian's gnupg (`make testenv` does, as root): %v", err)
	}
	home, err := os.MkdirTemp("", "kubewin-gpg-") //nolint:usetesting // not t.TempDir: gpg-agent's socket path in GNUPGHOME must stay short
	if err != nil {
		t.Fatal(err)
	}
	k := &Keyring{Home: home, gpg: gpg}
	t.Cleanup(func() {
		kill := exec.Command("gpgconf", "--kill", "gpg-agent")
		kill.Env = k.Env()
		_ = kill.Run()
		_ = os.RemoveAll(home)
	})
	return k
}

// Env is the environment of the process running gpg with this keyring (os.Environ with
// GNUPGHOME set).
func (k *Keyring) Env() []string {
	return append(os.Environ(), "GNUPGHOME="+k.Home)
}

func (k *Keyring) run(t testing.TB, args ...string) []byte {
	t.Helper()
	cmd := exec.Command(k.gpg, append([]string{"--batch"}, args...)...)
	cmd.Env = k.Env()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("gpg %s: %v\n%s", strings.Join(args, " "), err, stderr.Bytes())
	}
	return out
}

// Generate makes an RSA signing key without passphrase for the user ID name <email>. RSA, as
// the Terraform Registry accepts RSA and DSA keys only.
func (k *Keyring) Generate(t testing.TB, name, email string) Key {
	t.Helper()
	uid := fmt.Sprintf("%s <%s>", name, email)
	k.run(t, "--pinentry-mode", "loopback", "--passphrase", "", "--quick-gen-key", uid, "rsa3072", "sign", "never")
	var fpr string
	for line := range strings.Lines(string(k.run(t, "--with-colons", "--list-keys", "="+uid))) {
		if f := strings.Split(line, ":"); f[0] == "fpr" && len(f) > 9 {
			fpr = f[9]
			break
		}
	}
	if len(fpr) != 40 {
		t.Fatalf("gpg listed no fingerprint for the key of %q", uid)
	}
	return Key{
		Fingerprint: fpr,
		Advertised:  SigningKey{KeyID: fpr[len(fpr)-16:], ASCIIArmor: string(k.run(t, "--armor", "--export", fpr))},
	}
}

// Sign writes a detached binary signature of file, made with key, to sig.
func (k *Keyring) Sign(t testing.TB, key Key, file, sig string) {
	t.Helper()
	k.run(t, "--yes", "--local-user", key.Fingerprint, "--output", sig, "--detach-sign", file)
}
