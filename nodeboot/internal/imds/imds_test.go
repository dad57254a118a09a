package imds

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestInstance(t *testing.T) {
	status := http.StatusGone
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Metadata") != "true" || r.URL.Query().Get("api-version") != APIVersion || r.URL.Path != "/metadata/instance" {
			http.Error(w, `{"error":"Bad request"}`, http.StatusBadRequest)
			return
		}
		if status != http.StatusOK {
			http.Error(w, "gone", status)
			return
		}
		_, _ = w.Write([]byte(`{"compute":{"name":"pool_3","osProfile":{"computerName":"POOL000003"}}}`))
	}))
	defer srv.Close()
	c := Client{Endpoint: srv.URL}
	_, err := c.Instance(context.Background())
	var se *StatusError
	if !errors.As(err, &se) || !se.Transient() {
		t.Errorf("410: %v, want a transient StatusError", err)
	}
	status = http.StatusOK
	in, err := c.Instance(context.Background())
	if err != nil || in.Compute.OSProfile.ComputerName != "POOL000003" || in.Compute.Name != "pool_3" {
		t.Errorf("Instance = %+v, %v", in, err)
	}
	if _, err := (Client{Endpoint: srv.URL + "/wrong"}).Instance(context.Background()); !errors.As(err, &se) || se.Transient() {
		t.Errorf("400: %v, want a StatusError that is not transient", err)
	}
}
