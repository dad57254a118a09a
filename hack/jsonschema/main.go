// Command jsonschema writes the JSON Schemas of the kubewin documents (NodeConfig,
// ImageManifest) from their Go types, with descriptions from the Go comments. Run it from the
// module root (make generate): go run ./hack/jsonschema docs/schemas
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strconv"

	"github.com/invopop/jsonschema"

	"github.com/kubewin/kubewin/internal/api/v1alpha1"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: jsonschema OUTDIR")
		os.Exit(2)
	}
	if err := run(os.Args[1]); err != nil {
		fmt.Fprintln(os.Stderr, "jsonschema:", err)
		os.Exit(1)
	}
}

func run(dir string) error {
	r := &jsonschema.Reflector{
		// Strict decoding rejects unknown fields; the schema says so too.
		AllowAdditionalProperties:  false,
		RequiredFromJSONSchemaTags: true,
		DoNotReference:             false,
		Mapper:                     enums,
	}
	if err := r.AddGoComments("github.com/kubewin/kubewin", "./internal/api/v1alpha1"); err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for name, doc := range map[string]any{
		"nodeconfig.v1alpha1.json":    &v1alpha1.NodeConfig{},
		"imagemanifest.v1alpha1.json": &v1alpha1.ImageManifest{},
	} {
		s := r.Reflect(doc)
		s.ID = jsonschema.ID("https://kubewin.io/schemas/" + name)
		kind := reflect.TypeOf(doc).Elem().Name()
		root := s.Definitions[kind]
		root.Properties.Set("apiVersion", &jsonschema.Schema{Type: "string", Const: v1alpha1.GroupVersion})
		root.Properties.Set("kind", &jsonschema.Schema{Type: "string", Const: kind})
		root.Required = []string{"apiVersion", "kind"}
		b, err := json.MarshalIndent(s, "", "  ")
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, name), append(b, '\n'), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// enums gives the string and number enumerations their allowed values.
func enums(t reflect.Type) *jsonschema.Schema {
	switch t {
	case reflect.TypeOf(v1alpha1.NetworkMode("")):
		return stringEnum(v1alpha1.NetworkModes)
	case reflect.TypeOf(v1alpha1.CNIFlavour("")):
		return stringEnum(v1alpha1.CNIFlavours)
	case reflect.TypeOf(v1alpha1.RuntimeName("")):
		return stringEnum(v1alpha1.RuntimeNames)
	case reflect.TypeOf(v1alpha1.ProxyMode("")):
		return stringEnum(v1alpha1.ProxyModes)
	case reflect.TypeOf(v1alpha1.Isolation("")):
		return stringEnum(v1alpha1.Isolations)
	case reflect.TypeOf(v1alpha1.WindowsBuild(0)):
		s := &jsonschema.Schema{Type: "integer"}
		for _, b := range v1alpha1.WindowsBuilds {
			s.Enum = append(s.Enum, b)
			s.Description += strconv.FormatUint(uint64(b), 10) + " (Windows Server " + b.Release() + ") "
		}
		return s
	}
	return nil
}

func stringEnum[T ~string](values []T) *jsonschema.Schema {
	s := &jsonschema.Schema{Type: "string"}
	for _, v := range values {
		s.Enum = append(s.Enum, string(v))
	}
	return s
}
