// Package windows is nodeboot's platform on Windows Server: HNS networks, services, routes, file
// ACLs and the facts of the machine. Every decision is made here, in portable code tested on
// any OS, and becomes a request to one of a few thin backends: HNS requests as hcn JSON (package
// hcnjson), Service Control Manager operations with their configuration, PowerShell scripts
// written through the one quoting helper (package internal/powershell), and files created with
// their security descriptor. Native returns the backends that pass the requests to Windows
// (the only files built for Windows alone); package winfake records them on a simulated
// machine.
package windows
