package armtest

import (
	"bytes"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

// Schema contract: PUT and PATCH bodies are validated against the ARM deployment template JSON
// Schemas (schema.management.azure.com/schemas/<api-version>/<Namespace>.json) of their resource
// type and api-version, read from a local directory.
//
// A template resource and a REST body differ in two ways, handled so:
//
//  1. A template resource carries "type", "apiVersion" and "name" at the top, which the REST body
//     lacks (they are in the URL). The body is validated as the template resource the request
//     corresponds to: the body's members plus type and apiVersion from the route and name as a
//     template writes it (the names below the resource group joined by '/', e.g. "rt/route1").
//     The resource definitions do not forbid additional members, so the read-only members a
//     client may send back (id, etag, provisioningState) pass, as ARM ignores them. A template
//     must write "properties", a REST body need not (a route table without routes): of a resource
//     definition's own "required", only name, type and apiVersion are kept.
//  2. Every template value may be an ARM template expression ("[parameters('x')]"): the schemas
//     write each property as oneOf [its real schema, $ref common definitions#/definitions/expression].
//     A REST body cannot hold expressions, so the schemas are rewritten before compiling: the
//     expression alternative is removed from every oneOf/anyOf (a single remaining alternative
//     becomes an allOf, so errors name the real rule), and the expression definition itself
//     becomes a schema nothing satisfies.
//
// A PATCH body is partial (ARM merges it into the resource), so it is validated against a second
// rewrite of the schemas without "required"; types, enums, patterns and formats still apply.

// validatedTypes are the resource types whose PUT or PATCH bodies the server validates.
var validatedTypes = []struct{ typ, version string }{
	{typeScaleSet, ComputeAPIVersion},
	{typeRouteTable, NetworkAPIVersion},
	{typeRoute, NetworkAPIVersion},
	{typeVNet, NetworkAPIVersion},
	{typeSubnet, NetworkAPIVersion},
	{typeNSG, NetworkAPIVersion},
	{typePublicIP, NetworkAPIVersion},
	{typeLoadBalancer, NetworkAPIVersion},
	{typeNIC, NetworkAPIVersion},
	{typeNatGateway, NetworkAPIVersion},
	{typeVM, ComputeAPIVersion},
}

type schemaSet struct {
	dir     string
	full    map[string]*jsonschema.Schema // by schemaKey
	partial map[string]*jsonschema.Schema
}

func schemaKey(typ, version string) string { return strings.ToLower(typ) + "@" + version }

// Compiled schemas are shared by the servers of a process, keyed by directory.
var schemaCache = struct {
	sync.Mutex
	sets map[string]*schemaSet
}{sets: map[string]*schemaSet{}}

func loadSchemas(dir string) (*schemaSet, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	schemaCache.Lock()
	defer schemaCache.Unlock()
	if set := schemaCache.sets[abs]; set != nil {
		return set, nil
	}
	set := &schemaSet{dir: abs}
	if set.full, err = compileSchemas(abs, false); err != nil {
		return nil, err
	}
	if set.partial, err = compileSchemas(abs, true); err != nil {
		return nil, err
	}
	schemaCache.sets[abs] = set
	return set, nil
}

// compileSchemas loads every *.json file of dir, rewrites it (see above) and compiles the resource
// definitions of validatedTypes.
func compileSchemas(dir string, partial bool) (map[string]*jsonschema.Schema, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("armtest: no *.json schema files in %s (%s): give the directory of the ARM template schemas "+
			"(Microsoft.Compute.%s.json, Microsoft.Network.NRP.%s.json, common-definitions.json)",
			dir, EnvSchemas, ComputeAPIVersion, NetworkAPIVersion)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft4)
	c.AssertFormat()
	definitions := map[string]string{} // schemaKey → location of the resource definition
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
		if err != nil {
			return nil, fmt.Errorf("armtest: schema %s: %w", f, err)
		}
		root, _ := doc.(map[string]any)
		id, _ := root["id"].(string)
		id = strings.TrimSuffix(id, "#")
		if id == "" {
			return nil, fmt.Errorf("armtest: schema %s has no \"id\"", f)
		}
		isCommon := strings.HasSuffix(id, "/common/definitions.json")
		rewrite(root, isCommon, partial)
		if isCommon {
			if defs, ok := root["definitions"].(map[string]any); ok {
				defs["expression"] = map[string]any{"not": map[string]any{}}
			}
		}
		if err := c.AddResource(id, root); err != nil {
			return nil, fmt.Errorf("armtest: schema %s: %w", f, err)
		}
		defs, _ := root["resourceDefinitions"].(map[string]any)
		for name, d := range defs {
			envelopeOnly(d)
			typ, version := enumOf(d, "type"), enumOf(d, "apiVersion")
			if typ != "" && version != "" {
				definitions[schemaKey(typ, version)] = id + "#/resourceDefinitions/" + name
			}
		}
	}
	out := map[string]*jsonschema.Schema{}
	for _, t := range validatedTypes {
		loc, ok := definitions[schemaKey(t.typ, t.version)]
		if !ok {
			return nil, fmt.Errorf("armtest: the schemas in %s define no resource %s with api-version %s", dir, t.typ, t.version)
		}
		sch, err := c.Compile(loc)
		if err != nil {
			return nil, fmt.Errorf("armtest: compiling %s: %w", loc, err)
		}
		out[schemaKey(t.typ, t.version)] = sch
	}
	return out, nil
}

// envelopeOnly keeps, of a resource definition's required members, those a REST body gets from
// the URL (name, type, apiVersion). Templates must write "properties"; REST bodies may leave it
// out (a route table with no routes), and the definitions below it keep their own "required".
func envelopeOnly(def any) {
	d, _ := def.(map[string]any)
	req, ok := d["required"].([]any)
	if !ok {
		return
	}
	var kept []any
	for _, r := range req {
		if r == "name" || r == "type" || r == "apiVersion" {
			kept = append(kept, r)
		}
	}
	if len(kept) == 0 {
		delete(d, "required")
		return
	}
	d["required"] = kept
}

// enumOf returns the single enum value of a resource definition's property (type, apiVersion).
func enumOf(def any, prop string) string {
	d, _ := def.(map[string]any)
	props, _ := d["properties"].(map[string]any)
	p, _ := props[prop].(map[string]any)
	enum, _ := p["enum"].([]any)
	if len(enum) != 1 {
		return ""
	}
	s, _ := enum[0].(string)
	return s
}

// rewrite removes the template-expression alternatives from a schema document and, for partial
// bodies, its "required" keywords.
func rewrite(v any, isCommon, partial bool) {
	switch t := v.(type) {
	case map[string]any:
		for _, kw := range []string{"oneOf", "anyOf"} {
			alts, ok := t[kw].([]any)
			if !ok {
				continue
			}
			var kept []any
			for _, a := range alts {
				if !isExpressionRef(a, isCommon) {
					kept = append(kept, a)
				}
			}
			switch {
			case len(kept) == len(alts):
			case len(kept) == 1:
				delete(t, kw)
				all, _ := t["allOf"].([]any)
				t["allOf"] = append(all, kept[0])
			case len(kept) == 0:
				delete(t, kw)
				t["not"] = map[string]any{}
			default:
				t[kw] = kept
			}
		}
		if partial {
			// A property named "required" holds a schema (an object), the keyword a list.
			if _, ok := t["required"].([]any); ok {
				delete(t, "required")
			}
		}
		for _, child := range t {
			rewrite(child, isCommon, partial)
		}
	case []any:
		for _, child := range t {
			rewrite(child, isCommon, partial)
		}
	}
}

func isExpressionRef(v any, isCommon bool) bool {
	m, ok := v.(map[string]any)
	if !ok || len(m) != 1 {
		return false
	}
	ref, _ := m["$ref"].(string)
	return strings.HasSuffix(ref, "/common/definitions.json#/definitions/expression") ||
		(isCommon && ref == "#/definitions/expression")
}

var english = message.NewPrinter(language.English)

// validate checks a body as the template resource it corresponds to.
func (set *schemaSet) validate(typ, version, name string, body []byte, partial bool) *apiError {
	schemas := set.full
	if partial {
		schemas = set.partial
	}
	sch := schemas[schemaKey(typ, version)]
	if sch == nil {
		return newError(http.StatusInternalServerError, "InternalServerError", "armtest has no schema for %s %s", typ, version)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(body))
	if err != nil {
		return newError(http.StatusBadRequest, "InvalidRequestContent", "The request content was invalid and could not be deserialized: %v", err)
	}
	obj, ok := doc.(map[string]any)
	if !ok {
		return newError(http.StatusBadRequest, "InvalidRequestContent", "The request content was invalid: a %s body is a JSON object.", typ)
	}
	obj["type"], obj["apiVersion"], obj["name"] = typ, version, name
	err = sch.Validate(obj)
	if err == nil {
		return nil
	}
	var verr *jsonschema.ValidationError
	if !errors.As(err, &verr) {
		return newError(http.StatusInternalServerError, "InternalServerError", "validating against the schema: %v", err)
	}
	var details []*apiError
	var first string
	for _, leaf := range leaves(verr) {
		pointer := jsonPointer(leaf.InstanceLocation)
		rule := leaf.SchemaURL
		if kw := leaf.ErrorKind.KeywordPath(); len(kw) > 0 {
			rule += "/" + strings.Join(kw, "/")
		}
		msg := fmt.Sprintf("at %s: %s (schema rule %s)", pointer, leaf.ErrorKind.LocalizedString(english), rule)
		if first == "" {
			first = pointer
		}
		details = append(details, &apiError{Code: "InvalidRequestContent", Message: msg, Target: pointer})
	}
	if len(details) > 3 {
		details = details[:3]
	}
	var msgs []string
	for _, d := range details {
		msgs = append(msgs, d.Message)
	}
	e := newError(http.StatusBadRequest, "InvalidRequestContent",
		"The request content is invalid against the ARM template schema of %s (api-version %s): %s", typ, version, strings.Join(msgs, "; "))
	e.Target, e.Details = first, details
	return e
}

// leaves returns the innermost errors of a validation error, which name the failing rules.
func leaves(e *jsonschema.ValidationError) []*jsonschema.ValidationError {
	if len(e.Causes) == 0 {
		return []*jsonschema.ValidationError{e}
	}
	var out []*jsonschema.ValidationError
	for _, c := range e.Causes {
		out = append(out, leaves(c)...)
	}
	return out
}

func jsonPointer(tokens []string) string {
	if len(tokens) == 0 {
		return "/"
	}
	var b strings.Builder
	for _, t := range tokens {
		b.WriteString("/" + strings.ReplaceAll(strings.ReplaceAll(t, "~", "~0"), "/", "~1"))
	}
	return b.String()
}
