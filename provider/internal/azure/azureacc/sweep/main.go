// Command sweep deletes the resource groups that interrupted azure acceptance runs left in the
// subscription the ARM_* environment names (make sweep-azure): those tagged kubewin-acc-run whose
// kubewin-acc-created tag is older than -older-than.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/kubewin/kubewin/provider/internal/azure"
	"github.com/kubewin/kubewin/provider/internal/azure/azureacc"
)

func main() {
	olderThan := flag.Duration("older-than", 6*time.Hour, "delete the run groups created longer ago than this")
	flag.Parse()
	if err := run(*olderThan); err != nil {
		fmt.Fprintln(os.Stderr, "sweep:", err)
		os.Exit(1)
	}
}

func run(olderThan time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	c, err := azure.ConfigFrom(nil)
	if err != nil {
		return err
	}
	client, err := azure.New(ctx, c)
	if err != nil {
		return err
	}
	deleted, err := azureacc.Sweep(ctx, client, olderThan, time.Now())
	for _, g := range deleted {
		fmt.Println("deleted", g)
	}
	fmt.Printf("%d resource groups of acceptance runs older than %s deleted\n", len(deleted), olderThan)
	return err
}
