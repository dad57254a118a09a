package armtest

import (
	"crypto/rand"
	"crypto/rsa"
	"net/http"
	"strings"
	"time"
)

// Issuer is a test OIDC issuer on the server (at <URL>/oidc): it publishes its OpenID
// configuration and signing keys as Terraform Cloud (https://app.terraform.io) or GitHub Actions
// (https://token.actions.githubusercontent.com) do, and mints the tokens such a platform hands a
// run. A FederatedCredential with its URL lets those tokens be exchanged for access tokens.
type Issuer struct {
	url string
	key *rsa.PrivateKey
}

const issuerKeyID = "armtest-oidc-1"

func newIssuer(url string) (*Issuer, error) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, err
	}
	return &Issuer{url: url, key: key}, nil
}

// URL is the issuer identifier, the "iss" of its tokens.
func (i *Issuer) URL() string { return i.url }

// Mint returns a signed token (RS256) for subject and audience that expires after lifetime; a
// negative lifetime gives a token that has already expired.
func (i *Issuer) Mint(subject, audience string, lifetime time.Duration) (string, error) {
	now := time.Now()
	issued := now
	if lifetime < 0 {
		issued = now.Add(lifetime - time.Minute)
	}
	return signJWT(i.key, issuerKeyID, claims{
		Issuer:    i.url,
		Subject:   subject,
		Audience:  []string{audience},
		IssuedAt:  numericDate(issued.Unix()),
		NotBefore: numericDate(issued.Unix()),
		Expiry:    numericDate(now.Add(lifetime).Unix()),
		ID:        newUUID(),
	})
}

// serve answers /oidc/.well-known/openid-configuration and /oidc/jwks.
func (i *Issuer) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	switch strings.TrimPrefix(r.URL.Path, "/oidc") {
	case "/.well-known/openid-configuration":
		writeJSON(w, http.StatusOK, map[string]any{
			"issuer":                                i.url,
			"jwks_uri":                              i.url + "/jwks",
			"response_types_supported":              []string{"id_token"},
			"subject_types_supported":               []string{"public"},
			"id_token_signing_alg_values_supported": []string{"RS256"},
			"claims_supported":                      []string{"sub", "aud", "exp", "iat", "iss", "jti", "nbf"},
			"scopes_supported":                      []string{"openid"},
		})
	case "/jwks":
		writeJSON(w, http.StatusOK, jwks{Keys: []jwk{rsaJWK(&i.key.PublicKey, issuerKeyID)}})
	default:
		http.NotFound(w, r)
	}
}
