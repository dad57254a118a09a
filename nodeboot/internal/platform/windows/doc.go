// Package windows applies nodeboot's platform on Windows Server: HNS networks through hcsshim,
// services through the Service Control Manager, routes, file ACLs and the OS build. Every file
// but this one builds only for Windows; the decisions it applies are made in portable code
// (package platform) and tested on any OS.
package windows
