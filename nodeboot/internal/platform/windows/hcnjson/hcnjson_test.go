package hcnjson

import (
	"bytes"
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/printer"
	"go/token"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// decls are the type and constant declarations of Go files: type name → its printed type
// expression (struct fields one per line: name, type, tag), constant name → its printed value.
type decls struct{ types, consts map[string]string }

func parseDecls(t *testing.T, files []string) decls {
	t.Helper()
	d := decls{types: map[string]string{}, consts: map[string]string{}}
	fset := token.NewFileSet()
	printed := func(n ast.Node) string {
		var b bytes.Buffer
		if err := printer.Fprint(&b, fset, n); err != nil {
			t.Fatal(err)
		}
		return strings.ReplaceAll(b.String(), "any", "interface{}")
	}
	for _, path := range files {
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, decl := range f.Decls {
			g, ok := decl.(*ast.GenDecl)
			if !ok {
				continue
			}
			for _, spec := range g.Specs {
				switch s := spec.(type) {
				case *ast.TypeSpec:
					st, ok := s.Type.(*ast.StructType)
					if !ok {
						prefix := ""
						if s.Assign.IsValid() {
							prefix = "= "
						}
						d.types[s.Name.Name] = prefix + printed(s.Type)
						continue
					}
					var fields []string
					for _, fld := range st.Fields.List {
						tag := ""
						if fld.Tag != nil {
							tag = fld.Tag.Value
						}
						for _, name := range fld.Names {
							fields = append(fields, name.Name+" "+printed(fld.Type)+" "+tag)
						}
					}
					d.types[s.Name.Name] = "struct{" + strings.Join(fields, "; ") + "}"
				case *ast.ValueSpec:
					if g.Tok != token.CONST {
						continue
					}
					for i, name := range s.Names {
						if i < len(s.Values) {
							d.consts[name.Name] = printed(s.Values[i])
						}
					}
				}
			}
		}
	}
	return d
}

// Every type and constant here is declared in hcsshim's hcn package (the version in go.mod)
// exactly so: the same fields, field types and JSON tags, so that these requests marshal to
// the JSON hcn sends and hcn decodes them without losing a field.
func TestTwinsOfHcn(t *testing.T) {
	// go mod download, not go list -m: a module only Windows builds import is not in a fresh
	// module cache until something downloads it, and go list -m then names no directory.
	out, err := exec.Command("go", "mod", "download", "-json", "github.com/Microsoft/hcsshim").Output()
	if err != nil {
		t.Fatalf("locate hcsshim in the module cache: %v", err)
	}
	var mod struct{ Dir string }
	if err := json.Unmarshal(out, &mod); err != nil {
		t.Fatalf("go mod download -json: %v: %s", err, out)
	}
	hcnFiles, err := filepath.Glob(filepath.Join(mod.Dir, "hcn", "hcn*.go"))
	if err != nil || len(hcnFiles) == 0 {
		t.Fatalf("hcn sources: %v %v", hcnFiles, err)
	}
	var sources []string
	for _, f := range hcnFiles {
		if !strings.HasSuffix(f, "_test.go") {
			sources = append(sources, f)
		}
	}
	hcn := parseDecls(t, sources)
	ours := parseDecls(t, []string{"hcnjson.go"})
	if len(ours.types) < 20 {
		t.Fatalf("parsed only %d types of hcnjson.go", len(ours.types))
	}
	for name, typ := range ours.types {
		want, ok := hcn.types[name]
		if !ok {
			t.Errorf("hcn declares no type %s", name)
			continue
		}
		if typ != want {
			t.Errorf("type %s:\n ours %s\n  hcn %s", name, typ, want)
		}
	}
	for name, val := range ours.consts {
		if name == "V2" {
			continue
		}
		if want, ok := hcn.consts[name]; !ok || val != want {
			t.Errorf("const %s = %s, hcn has %q", name, val, want)
		}
	}
}
