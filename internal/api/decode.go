// Package api decodes the documents the kubewin binaries exchange (NodeConfig, ImageManifest)
// from JSON or YAML, strictly: unknown and duplicate fields are errors. It dispatches on
// apiVersion, so that a newer version can be added with a conversion to the internal one.
package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"sigs.k8s.io/yaml"
	goyaml "sigs.k8s.io/yaml/goyaml.v3"

	"github.com/kubewin/kubewin/internal/api/v1alpha1"
)

// MaxDocumentSize bounds what the decoders read. Custom data on Azure is at most 64 KiB; an
// image manifest with thousands of files stays well below this.
const MaxDocumentSize = 4 << 20

// DecodeNodeConfig strictly decodes a NodeConfig (JSON or YAML). It neither defaults nor validates.
func DecodeNodeConfig(data []byte) (*v1alpha1.NodeConfig, error) {
	var c v1alpha1.NodeConfig
	if err := decode(data, v1alpha1.KindNodeConfig, &c); err != nil {
		return nil, err
	}
	return &c, nil
}

// DecodeImageManifest strictly decodes an ImageManifest (JSON or YAML). It does not validate.
func DecodeImageManifest(data []byte) (*v1alpha1.ImageManifest, error) {
	var m v1alpha1.ImageManifest
	if err := decode(data, v1alpha1.KindImageManifest, &m); err != nil {
		return nil, err
	}
	return &m, nil
}

// LoadNodeConfig decodes, defaults and validates a NodeConfig. The error lists every problem.
func LoadNodeConfig(data []byte) (*v1alpha1.NodeConfig, error) {
	c, err := DecodeNodeConfig(data)
	if err != nil {
		return nil, err
	}
	c.Default()
	if errs := c.Validate(); len(errs) > 0 {
		return nil, &ValidationError{Kind: v1alpha1.KindNodeConfig, Errs: errs}
	}
	return c, nil
}

// LoadImageManifest decodes and validates an ImageManifest. The error lists every problem.
func LoadImageManifest(data []byte) (*v1alpha1.ImageManifest, error) {
	m, err := DecodeImageManifest(data)
	if err != nil {
		return nil, err
	}
	if errs := m.Validate(); len(errs) > 0 {
		return nil, &ValidationError{Kind: v1alpha1.KindImageManifest, Errs: errs}
	}
	return m, nil
}

// ValidationError lists every problem of a document, one per line, each with its field path.
type ValidationError struct {
	Kind string
	Errs field.ErrorList
}

func (e *ValidationError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "invalid %s (%d problems):", e.Kind, len(e.Errs))
	if len(e.Errs) == 1 {
		b.Reset()
		fmt.Fprintf(&b, "invalid %s:", e.Kind)
	}
	for _, err := range e.Errs {
		b.WriteString("\n- ")
		b.WriteString(err.Error())
	}
	return b.String()
}

// EncodeJSON writes a document as indented JSON, the form kubewin writes to disk and custom data.
func EncodeJSON(doc any) ([]byte, error) {
	b, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

type typeMeta struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
}

func decode(data []byte, kind string, into any) error {
	if len(data) > MaxDocumentSize {
		return fmt.Errorf("decode %s: document is %d bytes, over the limit of %d", kind, len(data), MaxDocumentSize)
	}
	if err := singleDocument(data); err != nil {
		return fmt.Errorf("decode %s: %w", kind, err)
	}
	// YAMLToJSONStrict rejects duplicate keys; JSON is valid YAML and passes through.
	js, err := yaml.YAMLToJSONStrict(data)
	if err != nil {
		return fmt.Errorf("decode %s: %w", kind, err)
	}
	var tm typeMeta
	if err := json.Unmarshal(js, &tm); err != nil {
		return fmt.Errorf("decode %s: the document must be an object with apiVersion and kind: %w", kind, err)
	}
	if tm.Kind != kind {
		return fmt.Errorf("decode %s: kind is %q, want %q", kind, tm.Kind, kind)
	}
	switch tm.APIVersion {
	case v1alpha1.GroupVersion:
		return strictJSON(js, into, kind)
	case "":
		return fmt.Errorf("decode %s: apiVersion is missing: set apiVersion: %s", kind, v1alpha1.GroupVersion)
	default:
		return fmt.Errorf("decode %s: apiVersion %q is not supported: use %s", kind, tm.APIVersion, v1alpha1.GroupVersion)
	}
}

// singleDocument rejects input holding more than one document (YAML "---" streams, or JSON
// followed by more data), which the YAML-to-JSON conversion would otherwise silently drop.
func singleDocument(data []byte) error {
	if trimmed := bytes.TrimSpace(data); len(trimmed) > 0 && trimmed[0] == '{' {
		if !json.Valid(trimmed) {
			return errors.New("not a single valid JSON object (check for trailing data)")
		}
		return nil
	}
	dec := goyaml.NewDecoder(bytes.NewReader(data))
	for n := 0; ; n++ {
		var v any
		err := dec.Decode(&v)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if n > 0 {
			return errors.New("the input holds more than one YAML document: pass exactly one")
		}
	}
}

func strictJSON(js []byte, into any, kind string) error {
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.DisallowUnknownFields()
	if err := dec.Decode(into); err != nil {
		return fmt.Errorf("decode %s: %w", kind, err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return fmt.Errorf("decode %s: unexpected data after the document", kind)
	}
	return nil
}
