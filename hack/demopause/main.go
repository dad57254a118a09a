// Command demopause is the sandbox ("pause") program of the demo's pause image: it does nothing
// until it is stopped. The real registry.k8s.io/pause Windows images are built on Windows
// (nanoserver base); make demo's local release mirror, which reaches no registry outside this
// machine, serves this one instead, built for windows/amd64.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, os.Interrupt, syscall.SIGTERM)
	<-stop
}
