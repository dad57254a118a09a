// Command armserver runs internal/armtest's Azure Resource Manager + Entra ID server on its own, for
// trying kubewin's azure backend by hand: it seeds a resource group, a virtual network with
// subnets and images, prints the URL, metadata host, CA file, tenant, subscription and a client
// ID and secret (also as environment lines), logs one line per request, and stops on SIGINT or
// SIGTERM. Its machines run nowhere: instances are provisioned, get addresses and serial logs,
// but no operating system boots.
package main

import (
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"sort"
	"strings"
	"syscall"

	"github.com/kubewin/kubewin/internal/armtest"
)

// listFlag collects a repeated flag.
type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }

func main() {
	log.SetFlags(0)
	log.SetPrefix("armserver: ")
	var subnets, images listFlag
	addr := flag.String("addr", "127.0.0.1:0", "listen address (127.0.0.1:<port>)")
	dir := flag.String("dir", "", "directory for the CA file (default: a temporary directory)")
	schemas := flag.String("schemas", "", "ARM template JSON Schemas directory: validate PUT and PATCH bodies (default $"+armtest.EnvSchemas+")")
	polls := flag.Int("polls", 1, "InProgress answers of a long-running operation before it ends")
	retryAfter := flag.Duration("retry-after", 0, "Retry-After of long-running operations (default 1s)")
	group := flag.String("resource-group", "kubewin", "resource group to create")
	vnet := flag.String("vnet", "kubewin-vnet=10.0.0.0/16", "virtual network to create, NAME=ADDRESS-PREFIX")
	flag.Var(&subnets, "subnet", "subnet of the virtual network, NAME=PREFIX (repeatable; default nodes=10.0.1.0/24)")
	flag.Var(&images, "image", "managed image or gallery image version ID to create (repeatable)")
	envFile := flag.String("env-file", "", "also write the client environment (KEY=VALUE lines) to this file")
	flag.Parse()
	if len(subnets) == 0 {
		subnets = listFlag{"nodes=10.0.1.0/24"}
	}

	s, err := armtest.New(armtest.Options{
		Addr: *addr, Dir: *dir, SchemasDir: *schemas, InProgressPolls: *polls, RetryAfter: *retryAfter,
		Logf: func(format string, args ...any) { log.Printf(format, args...) },
	})
	if err != nil {
		log.Fatal(err)
	}
	if err := seed(s, *group, *vnet, subnets, images); err != nil {
		_ = s.Close()
		log.Fatal(err)
	}
	env := strings.Join(s.Env(), "\n") + "\n"
	if *envFile != "" {
		if err := os.WriteFile(*envFile, []byte(env), 0o600); err != nil {
			_ = s.Close()
			log.Fatal(err)
		}
	}
	c := s.Credentials()
	fmt.Printf("armtest ARM + Entra ID server (simulated; no Azure behind it)\n")
	fmt.Printf("  URL            %s\n  metadata host  %s\n  CA file        %s\n  OIDC issuer    %s\n", s.URL(), s.MetadataHost(), s.CAFile(), s.Issuer().URL())
	fmt.Printf("  tenant         %s\n  subscription   %s\n  client id      %s\n  client secret  %s\n", c.TenantID, c.SubscriptionID, c.ClientID, c.ClientSecret)
	fmt.Printf("\n# client environment:\n%s", "export "+strings.ReplaceAll(strings.TrimSuffix(env, "\n"), "\n", "\nexport ")+"\n")

	stop := make(chan os.Signal, 1)
	signal.Notify(stop, os.Interrupt, syscall.SIGTERM)
	<-stop
	if err := s.Close(); err != nil {
		log.Fatal(err)
	}
}

func sortedNames(m map[string]string) []string {
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// seed creates the resource group, the virtual network and the images.
func seed(s *armtest.Server, group, vnet string, subnets, images []string) error {
	s.AddResourceGroup(group)
	name, prefix, ok := strings.Cut(vnet, "=")
	if !ok {
		return fmt.Errorf("-vnet %q: use NAME=ADDRESS-PREFIX, e.g. kubewin-vnet=10.0.0.0/16", vnet)
	}
	v := armtest.VirtualNetwork{ResourceGroup: group, Name: name, AddressPrefixes: []string{prefix}, Subnets: map[string]string{}}
	for _, sn := range subnets {
		n, p, ok := strings.Cut(sn, "=")
		if !ok {
			return fmt.Errorf("-subnet %q: use NAME=PREFIX, e.g. nodes=10.0.1.0/24", sn)
		}
		v.Subnets[n] = p
	}
	id, err := s.AddVirtualNetwork(v)
	if err != nil {
		return err
	}
	for _, n := range sortedNames(v.Subnets) {
		fmt.Printf("subnet %s/subnets/%s (%s)\n", id, n, v.Subnets[n])
	}
	for _, im := range images {
		if err := s.AddImage(im, nil); err != nil {
			return err
		}
		fmt.Printf("image %s\n", im)
	}
	return nil
}
