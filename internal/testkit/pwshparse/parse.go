//go:build cgo

package pwshparse

import (
	"errors"
	"fmt"

	powershell "github.com/alexaandru/go-sitter-forest/powershell"
	sitter "github.com/tree-sitter/go-tree-sitter"
)

// Tree is a parsed script.
type Tree struct {
	src  []byte
	root *sitter.Node
	tree *sitter.Tree
}

// Parse parses script.
func Parse(script string) (*Tree, error) {
	p := sitter.NewParser()
	defer p.Close()
	if err := p.SetLanguage(sitter.NewLanguage(powershell.GetLanguage())); err != nil {
		return nil, fmt.Errorf("load the PowerShell grammar: %w", err)
	}
	src := []byte(script)
	t := p.Parse(src, nil)
	if t == nil {
		return nil, errors.New("the PowerShell parser returned no tree")
	}
	return &Tree{src: src, root: t.RootNode(), tree: t}, nil
}

// Close frees the tree.
func (t *Tree) Close() { t.tree.Close() }

// Errors lists the tree's error and missing nodes with their position (1-based line and
// column) and text.
func (t *Tree) Errors() []string {
	var out []string
	t.walk(t.root, func(n *sitter.Node) {
		if n.IsError() || n.IsMissing() {
			p := n.StartPosition()
			kind := "syntax error"
			if n.IsMissing() {
				kind = "missing " + n.Kind()
			}
			out = append(out, fmt.Sprintf("%d:%d: %s at %q", p.Row+1, p.Column+1, kind, t.src[n.StartByte():n.EndByte()]))
		}
	})
	return out
}

// Nodes returns the source text of every node of the given kind, in order.
func (t *Tree) Nodes(kind string) []string {
	var out []string
	t.walk(t.root, func(n *sitter.Node) {
		if n.Kind() == kind {
			out = append(out, string(t.src[n.StartByte():n.EndByte()]))
		}
	})
	return out
}

func (t *Tree) walk(n *sitter.Node, f func(*sitter.Node)) {
	f(n)
	for i := uint(0); i < n.ChildCount(); i++ {
		t.walk(n.Child(i), f)
	}
}

// Check parses script and returns an error naming every error node, or nil.
func Check(script string) error {
	t, err := Parse(script)
	if err != nil {
		return err
	}
	defer t.Close()
	if errs := t.Errors(); len(errs) > 0 {
		return fmt.Errorf("PowerShell does not parse: %v", errs)
	}
	return nil
}
