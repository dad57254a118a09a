package kubeadmboot

import (
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"regexp"
	"strings"
)

// AdminCertificateScript is the shell script a control plane runs (ARM's run command) to sign a
// client certificate for csrPEM through the cluster's own CSR API with kubeadm's admin
// credential: the kube-apiserver-client signer, valid for the given seconds, approved by the
// admin. It prints the signed certificate and the cluster CA certificate, both PEM: no private
// key leaves its owner, and the request object is deleted once signed.
func AdminCertificateScript(name string, csrPEM []byte, seconds int) (string, error) {
	if !csrName.MatchString(name) {
		return "", fmt.Errorf("CSR name %q is not a DNS label", name)
	}
	if b, _ := pem.Decode(csrPEM); b == nil || b.Type != "CERTIFICATE REQUEST" {
		return "", fmt.Errorf("not a PEM certificate request")
	}
	manifest := fmt.Sprintf(`{"apiVersion":"certificates.k8s.io/v1","kind":"CertificateSigningRequest","metadata":{"name":%q},`+
		`"spec":{"request":%q,"signerName":"kubernetes.io/kube-apiserver-client","expirationSeconds":%d,"usages":["digital signature","client auth"]}}`,
		name, base64.StdEncoding.EncodeToString(csrPEM), seconds)
	lines := []string{
		"set -eu",
		"export KUBECONFIG=" + AdminKubeconfig,
		"printf '%s' '" + manifest + "' | kubectl create -f - >/dev/null",
		"kubectl certificate approve " + name + " >/dev/null",
		"i=0",
		"until cert=$(kubectl get csr " + name + " -o 'jsonpath={.status.certificate}') && [ -n \"$cert\" ]; do",
		"\ti=$((i + 1))",
		"\t[ \"$i\" -lt 60 ] || { echo 'certificate signing request " + name + " was not signed' >&2; exit 1; }",
		"\tsleep 1",
		"done",
		"kubectl delete csr " + name + " >/dev/null",
		"printf '%s' \"$cert\" | base64 -d",
		"cat " + CACertPath,
	}
	return strings.Join(lines, "\n") + "\n", nil
}

// UploadCertificatesScript is the shell script a control plane runs (ARM's run command) to upload
// the shared control plane certificates again, encrypted with certificateKey, for control
// planes that join later (kubeadm deletes an upload after two hours). kubeadm reaches the API
// server with its admin credential through the control plane endpoint (a copy of admin.conf at
// a path of its own: with admin.conf itself kubeadm would go through this machine's API server),
// so that the upload does not depend on this machine's API server. Its output, which shows the
// key, is not kept.
func UploadCertificatesScript(certificateKey string) string {
	return strings.Join([]string{
		"set -eu",
		"kc=$(mktemp)",
		"trap 'rm -f \"$kc\"' EXIT",
		"cp " + AdminKubeconfig + " \"$kc\"",
		"kubeadm init phase upload-certs --upload-certs --certificate-key " + certificateKey + " --kubeconfig \"$kc\" >/dev/null",
		"echo uploaded",
	}, "\n") + "\n"
}

var csrName = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)

// ParseAdminCertificate reads the script's output (a run command's message, whatever surrounds
// it): the signed certificate, then the CA certificate.
func ParseAdminCertificate(out string) (cert, ca []byte, err error) {
	var blocks [][]byte
	rest := []byte(out)
	for {
		i := strings.Index(string(rest), "-----BEGIN CERTIFICATE-----")
		if i < 0 {
			break
		}
		var b *pem.Block
		b, rest = pem.Decode(rest[i:])
		if b == nil {
			break
		}
		blocks = append(blocks, pem.EncodeToMemory(b))
	}
	if len(blocks) != 2 {
		return nil, nil, fmt.Errorf("the control plane answered %d certificates, want the signed one and the CA's: %s", len(blocks), strings.TrimSpace(out))
	}
	return blocks[0], blocks[1], nil
}
