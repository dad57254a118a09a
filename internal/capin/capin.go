// Package capin computes and checks cluster CA pins the way kubeadm does: "sha256:" followed
// by the hex sha256 of the certificate's DER SubjectPublicKeyInfo (kubeadm join's
// --discovery-token-ca-cert-hash).
package capin

import (
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"strings"
)

const prefix = "sha256:"

// Hash returns the pin of a certificate.
func Hash(cert *x509.Certificate) string {
	sum := sha256.Sum256(cert.RawSubjectPublicKeyInfo)
	return prefix + hex.EncodeToString(sum[:])
}

// ParseCertificates returns every certificate in a PEM bundle.
func ParseCertificates(pemData []byte) ([]*x509.Certificate, error) {
	var certs []*x509.Certificate
	for {
		var block *pem.Block
		block, pemData = pem.Decode(pemData)
		if block == nil {
			break
		}
		if block.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("parse CA certificate: %w", err)
		}
		certs = append(certs, c)
	}
	if len(certs) == 0 {
		return nil, fmt.Errorf("no CA certificate in the PEM data")
	}
	return certs, nil
}

// HashPEM returns the pin of the first certificate of a PEM bundle.
func HashPEM(pemData []byte) (string, error) {
	certs, err := ParseCertificates(pemData)
	if err != nil {
		return "", err
	}
	return Hash(certs[0]), nil
}

// Verify returns nil when one of the certificates matches one of the pins.
func Verify(pins []string, certs []*x509.Certificate) error {
	var got []string
	for _, c := range certs {
		h := Hash(c)
		for _, p := range pins {
			if strings.EqualFold(p, h) {
				return nil
			}
		}
		got = append(got, h)
	}
	return fmt.Errorf("the cluster CA %s matches none of the pinned hashes %s", strings.Join(got, ", "), strings.Join(pins, ", "))
}
