package armtest

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v6"
)

// Boot diagnostics: retrieveBootDiagnosticsData hands out a SAS-like URI of the serial log,
// served by the server itself without a bearer token (as a storage blob URI with a SAS).

const blobPrefix = "/bootdiagnostics/"

type blob struct {
	scaleSet string // lower-case scale set ID, with instance; or
	instance int
	vm       string // lower-case virtual machine ID
	expires  time.Time
}

func (s *Server) retrieveBootDiagnostics(w http.ResponseWriter, q *armRequest) *apiError {
	s.mu.Lock()
	defer s.mu.Unlock()
	ss, in, e := s.instance(q)
	if e != nil {
		return e
	}
	res, e := s.serialLogURI(q, blob{scaleSet: strings.ToLower(ss.id), instance: in.id}, in.info.ComputerName)
	if e != nil {
		return e
	}
	writeJSON(w, http.StatusOK, res)
	return nil
}

// serialLogURI registers a SAS-like URI of a machine's serial log; s.mu is held.
func (s *Server) serialLogURI(q *armRequest, b blob, name string) (armcompute.RetrieveBootDiagnosticsDataResult, *apiError) {
	minutes := 120
	if v := q.r.URL.Query().Get("sasUriExpirationTimeInMinutes"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 1440 {
			return armcompute.RetrieveBootDiagnosticsDataResult{}, invalidParameter("sasUriExpirationTimeInMinutes",
				"sasUriExpirationTimeInMinutes=%q must be a number of minutes from 1 to 1440.", v)
		}
		minutes = n
	}
	token := strings.ReplaceAll(newUUID(), "-", "")
	b.expires = time.Now().Add(time.Duration(minutes) * time.Minute)
	s.blobs[token] = b
	uri := fmt.Sprintf("%s%s%s/%s.serialconsole.log?sv=2022-11-02&se=%s&sr=b&sp=r&sig=%s",
		s.url, blobPrefix, token, name, b.expires.UTC().Format(time.RFC3339), token)
	return armcompute.RetrieveBootDiagnosticsDataResult{SerialConsoleLogBlobURI: &uri}, nil
}

// serveBlob serves a serial log by the URI retrieveBootDiagnosticsData returned.
func (s *Server) serveBlob(w http.ResponseWriter, r *http.Request) {
	token, _, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, blobPrefix), "/")
	s.mu.Lock()
	b, ok := s.blobs[token]
	var m *machine
	if ss := s.scaleSets[b.scaleSet]; ok && ss != nil && ss.instances[b.instance] != nil {
		m = &ss.instances[b.instance].machine
	}
	if vm := s.vms[b.vm]; ok && vm != nil {
		m = &vm.machine
	}
	s.mu.Unlock()
	switch {
	case r.Method != http.MethodGet:
		storageError(w, http.StatusMethodNotAllowed, "UnsupportedHttpVerb", "The resource doesn't support specified Http Verb.")
	case !ok || time.Now().After(b.expires):
		storageError(w, http.StatusForbidden, "AuthenticationFailed",
			"Server failed to authenticate the request. Make sure the value of Authorization header is formed correctly including the signature.")
	case m == nil:
		storageError(w, http.StatusNotFound, "BlobNotFound", "The specified blob does not exist.")
	default:
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("x-ms-blob-type", "AppendBlob")
		if !m.info.Linux {
			_, _ = w.Write([]byte(sacBanner))
			return
		}
		_, _ = w.Write(s.opts.Booter.SerialLog(m.info))
	}
}

// sacBanner is the serial log of a Windows machine. Azure's Windows images run Emergency
// Management Services with the Special Administration Console on COM1, the port boot
// diagnostics record ("SAC is enabled by default on all versions of Windows Server images in
// Azure" and "Computer is booting, SAC started and initialized." on the serial console:
// https://learn.microsoft.com/en-us/troubleshoot/azure/virtual-machines/windows/serial-console-windows):
// what a program writes to COM1 (nodeboot's progress and report lines) is not in it.
const sacBanner = "\r\nComputer is booting, SAC started and initialized.\r\n\r\n" +
	"Use the \"ch -?\" command for information about using channels.\r\nUse the \"?\" command for general help.\r\n\r\n\r\nSAC>"

// storageError answers as Azure Storage does, in XML.
func storageError(w http.ResponseWriter, status int, code, message string) {
	w.Header().Set("Content-Type", "application/xml")
	w.Header().Set("x-ms-error-code", code)
	w.WriteHeader(status)
	_, _ = fmt.Fprintf(w, `<?xml version="1.0" encoding="utf-8"?><Error><Code>%s</Code><Message>%s</Message></Error>`, code, message)
}
