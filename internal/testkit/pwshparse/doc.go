// Package pwshparse parses PowerShell with the tree-sitter PowerShell grammar
// (airbus-cert/tree-sitter-powershell, the grammar published on npm as tree-sitter-powershell,
// through its Go build in alexaandru/go-sitter-forest) so that tests can check that every script
// kubewin writes is well-formed PowerShell. The parser is C, so the package needs cgo; without
// cgo it is empty and the tests that use it say so.
package pwshparse
