package capin

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"strings"
	"testing"
	"time"
)

func selfSigned(t *testing.T) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "ca"}, NotBefore: time.Now(),
		NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

func TestVerify(t *testing.T) {
	a, b := selfSigned(t), selfSigned(t)
	pinA, err := HashPEM(a)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(pinA, "sha256:") || len(pinA) != len("sha256:")+64 {
		t.Fatalf("pin %q", pinA)
	}
	certsA, _ := ParseCertificates(a)
	certsB, _ := ParseCertificates(b)
	if err := Verify([]string{pinA}, certsA); err != nil {
		t.Errorf("own pin rejected: %v", err)
	}
	if err := Verify([]string{strings.ToUpper(pinA[7:]) + "x", pinA}, certsA); err != nil {
		t.Errorf("second pin not tried: %v", err)
	}
	if err := Verify([]string{pinA}, certsB); err == nil || !strings.Contains(err.Error(), "matches none of the pinned hashes") {
		t.Errorf("other CA accepted: %v", err)
	}
	if _, err := ParseCertificates([]byte("not pem")); err == nil {
		t.Error("garbage parsed")
	}
}
