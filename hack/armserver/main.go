// Command armserver runs internal/armtest's Azure Resource Manager + Entra ID server on its own, for
// trying kubewin's azure backend by hand and for make demo-azure: it seeds a resource group, a
// virtual network with subnets, a route table and images, prints the URL, metadata host, CA file,
// tenant, subscription and a client ID and secret (also as environment lines), logs one line per
// request, and stops on SIGINT or SIGTERM, printing the ARM writes it served. With -boot, every
// scale-set instance boots as a simulated Windows machine running nodeboot with the custom data
// it was given (an image given as ID=DIRECTORY is that kubewin-local image); without it, instances
// run nowhere.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"syscall"

	"github.com/kubewin/kubewin/internal/api"
	"github.com/kubewin/kubewin/internal/azureimage"
	"github.com/kubewin/kubewin/internal/sim/simmachine"
	"github.com/kubewin/kubewin/internal/testkit/armtest"
	"github.com/kubewin/kubewin/internal/testkit/armtest/simboot"
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
	subscription := flag.String("subscription", "", "the subscription ID the server serves (default: a random one)")
	group := flag.String("resource-group", "kubewin", "resource group to create")
	vnet := flag.String("vnet", "kubewin-vnet=10.0.0.0/16", "virtual network to create, NAME=ADDRESS-PREFIX")
	flag.Var(&subnets, "subnet", "subnet of the virtual network, NAME=PREFIX (repeatable; default nodes=10.0.1.0/24)")
	flag.Var(&images, "image", "managed image or gallery image version ID to create, or ID=DIRECTORY of a kubewin-local image that instances boot from "+
		"and whose manifest gives the image's kubewin tags (repeatable)")
	routeTable := flag.String("route-table", "", "route table to create, associated with every subnet")
	boot := flag.String("boot", "", "nodeboot binary for this host: boot instances as simulated machines running it")
	kubeBin := flag.String("kube-bin", "", "directory of kubeadm, kubectl and the control plane's programs (.testbin): boot Linux machines (clusters) "+
		"as simulated machines with them")
	envFile := flag.String("env-file", "", "also write the client environment (KEY=VALUE lines) to this file")
	tfvars := flag.String("tfvars", "", "also write Terraform variables (resource_group_name, location, subnet_id, route_table_id, image_id) as JSON "+
		"to this file")
	flag.Parse()
	if len(subnets) == 0 {
		subnets = listFlag{"nodes=10.0.1.0/24"}
	}

	if *dir == "" && *boot != "" {
		log.Fatal("-boot needs -dir, where the simulated machines live")
	}
	opts := armtest.Options{
		Addr: *addr, Dir: *dir, SubscriptionID: *subscription, SchemasDir: *schemas, InProgressPolls: *polls, RetryAfter: *retryAfter,
		Logf: func(format string, args ...any) { log.Printf(format, args...) },
	}
	var booter *simboot.Booter
	if *boot != "" {
		booter = &simboot.Booter{Dir: filepath.Join(*dir, "instances"), Nodeboot: *boot, KubeBin: *kubeBin}
		opts.Booter = booter
	}
	s, err := armtest.New(opts)
	if err != nil {
		log.Fatal(err)
	}
	vars, err := seed(s, booter, *group, *vnet, subnets, images, *routeTable)
	if err == nil && *tfvars != "" {
		var b []byte
		if b, err = json.MarshalIndent(vars, "", "  "); err == nil {
			err = os.WriteFile(*tfvars, b, 0o644)
		}
	}
	if err != nil {
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
	fmt.Printf("  URL            %s\n  metadata host  %s\n  CA file        %s\n  OIDC issuer    %s\n", s.URL(), s.MetadataHost(), s.CAFile(),
		s.Issuer().URL())
	fmt.Printf("  tenant         %s\n  subscription   %s\n  client id      %s\n  client secret  %s\n", c.TenantID, c.SubscriptionID, c.ClientID,
		c.ClientSecret)
	fmt.Printf("\n# client environment:\n%s", "export "+strings.ReplaceAll(strings.TrimSuffix(env, "\n"), "\n", "\nexport ")+"\n")

	stop := make(chan os.Signal, 1)
	signal.Notify(stop, os.Interrupt, syscall.SIGTERM)
	<-stop
	w := s.Writes()
	fmt.Printf("ARM writes served: %d\n", w.Total)
	for _, t := range sortedNames(w.ByType) {
		fmt.Printf("  %-50s %d\n", t, w.ByType[t])
	}
	if err := s.Close(); err != nil {
		log.Fatal(err)
	}
}

func sortedNames[V any](m map[string]V) []string {
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// seed creates the resource group, the virtual network, the route table and the images, and
// returns them as Terraform variables.
func seed(s *armtest.Server, booter *simboot.Booter, group, vnet string, subnets, images []string, routeTable string) (map[string]string, error) {
	vars := map[string]string{"resource_group_name": group, "location": s.Location()}
	s.AddResourceGroup(group)
	name, prefix, ok := strings.Cut(vnet, "=")
	if !ok {
		return nil, fmt.Errorf("-vnet %q: use NAME=ADDRESS-PREFIX, e.g. kubewin-vnet=10.0.0.0/16", vnet)
	}
	v := armtest.VirtualNetwork{ResourceGroup: group, Name: name, AddressPrefixes: []string{prefix}, Subnets: map[string]string{}}
	for _, sn := range subnets {
		n, p, ok := strings.Cut(sn, "=")
		if !ok {
			return nil, fmt.Errorf("-subnet %q: use NAME=PREFIX, e.g. nodes=10.0.1.0/24", sn)
		}
		v.Subnets[n] = p
	}
	id, err := s.AddVirtualNetwork(v)
	if err != nil {
		return nil, err
	}
	var subnetIDs []string
	for _, n := range sortedNames(v.Subnets) {
		subnetIDs = append(subnetIDs, id+"/subnets/"+n)
		fmt.Printf("subnet %s/subnets/%s (%s)\n", id, n, v.Subnets[n])
	}
	vars["subnet_id"] = subnetIDs[0]
	if routeTable != "" {
		rt, err := s.AddRouteTable(group, routeTable, subnetIDs...)
		if err != nil {
			return nil, err
		}
		vars["route_table_id"] = rt
		fmt.Printf("route table %s\n", rt)
	}
	for _, im := range images {
		imageID, dir, withDir := strings.Cut(im, "=")
		var tags map[string]string
		if withDir {
			raw, err := os.ReadFile(filepath.Join(dir, simmachine.ImageManifestFile))
			if err != nil {
				return nil, fmt.Errorf("-image %s: %w", im, err)
			}
			m, err := api.LoadImageManifest(raw)
			if err != nil {
				return nil, fmt.Errorf("-image %s: %w", im, err)
			}
			tags = azureimage.Tags(m)
			if booter != nil {
				booter.AddImage(imageID, dir)
			}
		}
		if err := s.AddImage(imageID, tags); err != nil {
			return nil, err
		}
		if vars["image_id"] == "" {
			vars["image_id"] = imageID
		}
		fmt.Printf("image %s\n", imageID)
	}
	return vars, nil
}
