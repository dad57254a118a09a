// Package testkit and the packages below it are kubewin's test and demo infrastructure: the ARM
// and Entra ID test server, a Terraform provider registry, an OCI registry, an upstream-layout
// release mirror, a throwaway certificate authority for servers on 127.0.0.1, the built test
// programs, simulated Linux machines, a WinRM test server and golden-file helpers.
//
// Nothing here ships: no product binary (the Terraform provider, the Packer plugin, nodeboot on
// any platform) may import a package below internal/testkit, which TestProductsDoNotImportTestkit
// checks. What the local backend ships as simulation lives in internal/sim.
package testkit
