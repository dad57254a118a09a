package armtest

import (
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"strings"
	"time"
)

// The server signs and checks JSON Web Tokens (RFC 7519) itself: the access tokens it issues, the
// tokens of its test OIDC issuer, and the client assertions it receives. Only RSA signatures are
// handled: RS256 (what Entra, Terraform Cloud and GitHub Actions sign with) and PS256 (what MSAL
// signs certificate assertions with).

// claims are the registered claims kubewin's flows use, plus the Entra access-token claims.
type claims struct {
	Issuer    string      `json:"iss"`
	Subject   string      `json:"sub"`
	Audience  audience    `json:"aud"`
	Expiry    numericDate `json:"exp"`
	NotBefore numericDate `json:"nbf,omitempty"`
	IssuedAt  numericDate `json:"iat,omitempty"`
	ID        string      `json:"jti,omitempty"`
	TenantID  string      `json:"tid,omitempty"`
	AppID     string      `json:"appid,omitempty"`
	ObjectID  string      `json:"oid,omitempty"`
	Version   string      `json:"ver,omitempty"`
}

// audience is the "aud" claim: one string or an array of strings.
type audience []string

func (a audience) MarshalJSON() ([]byte, error) {
	if len(a) == 1 {
		return json.Marshal(a[0])
	}
	return json.Marshal([]string(a))
}

func (a *audience) UnmarshalJSON(b []byte) error {
	var one string
	if err := json.Unmarshal(b, &one); err == nil {
		*a = audience{one}
		return nil
	}
	var many []string
	if err := json.Unmarshal(b, &many); err != nil {
		return errors.New(`"aud" must be a string or an array of strings`)
	}
	*a = many
	return nil
}

func (a audience) contains(s string) bool {
	for _, v := range a {
		if v == s {
			return true
		}
	}
	return false
}

// numericDate is a JWT NumericDate: seconds since the epoch, possibly written as a float.
type numericDate int64

func (d *numericDate) UnmarshalJSON(b []byte) error {
	var f float64
	if err := json.Unmarshal(b, &f); err != nil {
		return fmt.Errorf("a date claim must be a number of seconds since 1970: %s", b)
	}
	*d = numericDate(f)
	return nil
}

func (d numericDate) time() time.Time { return time.Unix(int64(d), 0).UTC() }

type jwtHeader struct {
	Alg     string `json:"alg"`
	Typ     string `json:"typ,omitempty"`
	Kid     string `json:"kid,omitempty"`
	X5t     string `json:"x5t,omitempty"`
	X5tS256 string `json:"x5t#S256,omitempty"`
}

// signJWT signs c with key using RS256.
func signJWT(key *rsa.PrivateKey, kid string, c claims) (string, error) {
	h, err := json.Marshal(jwtHeader{Alg: "RS256", Typ: "JWT", Kid: kid})
	if err != nil {
		return "", err
	}
	body, err := json.Marshal(c)
	if err != nil {
		return "", err
	}
	input := base64.RawURLEncoding.EncodeToString(h) + "." + base64.RawURLEncoding.EncodeToString(body)
	sum := sha256.Sum256([]byte(input))
	sig, err := rsa.SignPKCS1v15(rand.Reader, key, crypto.SHA256, sum[:])
	if err != nil {
		return "", err
	}
	return input + "." + base64.RawURLEncoding.EncodeToString(sig), nil
}

// parsedJWT is a token split into its parts; its signature is not checked yet.
type parsedJWT struct {
	header    jwtHeader
	claims    claims
	input     string // header.payload, the signed bytes
	signature []byte
}

func parseJWT(token string) (*parsedJWT, error) {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return nil, errors.New("a JWT has three dot-separated parts")
	}
	var p parsedJWT
	for i, dst := range []any{&p.header, &p.claims} {
		raw, err := decodeSegment(parts[i])
		if err != nil {
			return nil, err
		}
		if err := json.Unmarshal(raw, dst); err != nil {
			return nil, fmt.Errorf("JWT part %d: %w", i+1, err)
		}
	}
	sig, err := decodeSegment(parts[2])
	if err != nil {
		return nil, err
	}
	p.input, p.signature = parts[0]+"."+parts[1], sig
	return &p, nil
}

func decodeSegment(s string) ([]byte, error) {
	b, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(s, "="))
	if err != nil {
		return nil, errors.New("a JWT part is not base64url")
	}
	return b, nil
}

// verify checks the token's signature with pub.
func (p *parsedJWT) verify(pub *rsa.PublicKey) error {
	sum := sha256.Sum256([]byte(p.input))
	var err error
	switch p.header.Alg {
	case "RS256":
		err = rsa.VerifyPKCS1v15(pub, crypto.SHA256, sum[:], p.signature)
	case "PS256":
		err = rsa.VerifyPSS(pub, crypto.SHA256, sum[:], p.signature, &rsa.PSSOptions{SaltLength: rsa.PSSSaltLengthAuto})
	default:
		return fmt.Errorf("signing algorithm %q is not supported (use RS256 or PS256)", p.header.Alg)
	}
	if err != nil {
		return errors.New("the signature does not verify")
	}
	return nil
}

// jwk is an RSA JSON Web Key (RFC 7517) as published in a JWKS document.
type jwk struct {
	Kty string `json:"kty"`
	Use string `json:"use,omitempty"`
	Kid string `json:"kid"`
	Alg string `json:"alg,omitempty"`
	N   string `json:"n"`
	E   string `json:"e"`
}

type jwks struct {
	Keys []jwk `json:"keys"`
}

func rsaJWK(pub *rsa.PublicKey, kid string) jwk {
	return jwk{
		Kty: "RSA", Use: "sig", Kid: kid, Alg: "RS256",
		N: base64.RawURLEncoding.EncodeToString(pub.N.Bytes()),
		E: base64.RawURLEncoding.EncodeToString(big.NewInt(int64(pub.E)).Bytes()),
	}
}

func (k jwk) rsaKey() (*rsa.PublicKey, error) {
	if k.Kty != "RSA" {
		return nil, fmt.Errorf("key %q is of type %q, not RSA", k.Kid, k.Kty)
	}
	n, err := base64.RawURLEncoding.DecodeString(k.N)
	if err != nil {
		return nil, fmt.Errorf("key %q: bad modulus", k.Kid)
	}
	e, err := base64.RawURLEncoding.DecodeString(k.E)
	if err != nil || len(e) == 0 || len(e) > 4 {
		return nil, fmt.Errorf("key %q: bad exponent", k.Kid)
	}
	return &rsa.PublicKey{N: new(big.Int).SetBytes(n), E: int(new(big.Int).SetBytes(e).Int64())}, nil
}
