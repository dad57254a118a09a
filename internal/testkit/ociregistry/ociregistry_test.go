package ociregistry

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// A registry with a login refuses what a real one refuses: no credentials or wrong ones get 401
// with a Basic challenge and an UNAUTHORIZED error, the right ones the API.
func TestServeWithLoginRefusesWrongCredentials(t *testing.T) {
	reg := ServeWithLogin(t, "builder", "pw")
	get := func(user, password string) (*http.Response, string) {
		req, err := http.NewRequest(http.MethodGet, "http://"+reg.Host+"/v2/", nil)
		if err != nil {
			t.Fatal(err)
		}
		if user != "" {
			req.SetBasicAuth(user, password)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = resp.Body.Close() }()
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp, string(body)
	}
	for _, login := range [][2]string{{"", ""}, {"builder", "wrong"}, {"someone", "pw"}} {
		resp, body := get(login[0], login[1])
		if resp.StatusCode != http.StatusUnauthorized || resp.Header.Get("WWW-Authenticate") != `Basic realm="kubewin-test-registry"` ||
			!strings.Contains(body, `"code":"UNAUTHORIZED"`) {
			t.Errorf("login %q: %s, WWW-Authenticate %q, %s", login, resp.Status, resp.Header.Get("WWW-Authenticate"), body)
		}
	}
	if resp, body := get("builder", "pw"); resp.StatusCode != http.StatusOK {
		t.Errorf("the right login: %s %s", resp.Status, body)
	}
}
