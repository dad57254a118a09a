//go:build !linux

package winfake

func setFileACL(string, string) error { return errNoFileACLs }

func fileACL(string) (string, error) { return "", errNoFileACLs }
