// Command benchreport turns the output of make bench's Go benchmarks into the product's
// figures table (Markdown): one row per reported metric, labelled, in the order measured.
package main

import (
	"bufio"
	"fmt"
	"log"
	"os"
	"regexp"
	"strconv"
	"strings"
)

// figures names each benchmark metric.
var figures = map[string]string{
	"BenchmarkJoin p50-ms":                              "join, discovery to kubelet credential, p50 (ms)",
	"BenchmarkJoin floor-p50-ms":                        "minimal kubeadm-style join (floor), p50 (ms)",
	"BenchmarkJoin p50-x-floor":                         "join p50 / floor p50",
	"BenchmarkJoin p95-ms":                              "join, discovery to kubelet credential, p95 (ms)",
	"BenchmarkJoin floor-p95-ms":                        "minimal kubeadm-style join (floor), p95 (ms)",
	"BenchmarkJoin p95-x-floor":                         "join p95 / floor p95",
	"BenchmarkConcurrentJoins wall-s/100-joins":         "100 concurrent joins, wall time (s)",
	"BenchmarkConcurrentJoins floor-wall-s/100-joins":   "100 concurrent floor joins, wall time (s)",
	"BenchmarkConcurrentJoins wall-x-floor":             "100 concurrent joins / 100 concurrent floor joins",
	"BenchmarkRunIdleRSS idle-RSS-MiB":                  "nodeboot run, idle RSS (MiB)",
	"BenchmarkStart median-s/start":                     "local control plane start, median (s)",
	"BenchmarkPoolApply/nodes=1 s/apply":                "terraform apply, pool of 1 local node (s)",
	"BenchmarkPoolApply/nodes=10 s/apply":               "terraform apply, pool of 10 local nodes (s)",
	"BenchmarkPoolApply/nodes=50 s/apply":               "terraform apply, pool of 50 local nodes (s)",
	"BenchmarkPoolApply/nodes=500 s/apply":              "terraform apply, pool of 500 local nodes (s)",
	"BenchmarkPoolApply/nodes=10 x-1-node":              "pool of 10 local nodes / pool of 1",
	"BenchmarkPoolApply/nodes=50 x-1-node":              "pool of 50 local nodes / pool of 1",
	"BenchmarkPoolApply/nodes=500 x-1-node":             "pool of 500 local nodes / pool of 1",
	"BenchmarkPoolApply/plan-nodes=500 s/plan":          "terraform plan, pool of 500 local nodes (s)",
	"BenchmarkAzurePoolApply/nodes=1 s/apply":           "terraform apply, azure pool of 1 node, ARM test server (s)",
	"BenchmarkAzurePoolApply/nodes=10 s/apply":          "terraform apply, azure pool of 10 nodes, ARM test server (s)",
	"BenchmarkAzurePoolApply/nodes=50 s/apply":          "terraform apply, azure pool of 50 nodes, ARM test server (s)",
	"BenchmarkAzurePoolApply/nodes=1 arm-writes/apply":  "ARM writes for the scale set, pool of 1",
	"BenchmarkAzurePoolApply/nodes=10 arm-writes/apply": "ARM writes for the scale set, pool of 10",
	"BenchmarkAzurePoolApply/nodes=50 arm-writes/apply": "ARM writes for the scale set, pool of 50",
	"BenchmarkPlanRoutes s/plan":                        "terraform plan, 400 routes (s)",
	"BenchmarkSecondBake first-bake-bytes":              "bake download, cold host cache (bytes)",
	"BenchmarkSecondBake second-bake-bytes":             "bake download, second bake, warm cache (bytes)",
	"BenchmarkSecondBake bake-bytes/workload-image":     "bake download added per pre-pulled workload image of 4 MiB (bytes)",
	"BenchmarkSecondBake bake-s/workload-image":         "bake time added per pre-pulled workload image of 4 MiB (s)",
	"BenchmarkSecondBake first-boot-bytes":              "first boot download of a node baked with 2 workload images (bytes)",
	"BenchmarkAzureClusterApply s/apply":                "terraform apply, azure cluster of 3 control planes and 2 Linux agents, ARM test server (s)",
	"BenchmarkAzureClusterApply arm-writes/apply":       "ARM writes of that apply",
	"BenchmarkAzureClusterApply s/destroy":              "terraform destroy of that cluster (s)",
	"BenchmarkAzureClusterApply arm-writes/destroy":     "ARM writes of that destroy",
}

// writesByType is a benchmark's ARM writes of one resource type: writes-<type>/<step>.
var writesByType = regexp.MustCompile(`^(Benchmark\S+) writes-(\S+)/(\S+)$`)

// poolFloor is a local pool apply's figure beside the floor: poolFloorFigures's, for n nodes.
var poolFloor = regexp.MustCompile(`^BenchmarkPoolApply/(?:floor-)?nodes=(\d+) (\S+)$`)

var poolFloorFigures = map[string]string{
	"floor-s":              "%s minimal nodes joining the same control plane at once and going Ready (floor, s)",
	"x-floor":              "pool of %s local nodes / floor of %[1]s",
	"cp-cpu-ms/node":       "control plane CPU per node, pool of %s local nodes (ms)",
	"floor-cp-cpu-ms/node": "control plane CPU per node, floor of %s (ms)",
}

// name is a metric's figure: its name in figures, ARM writes by resource type, a pool's figure
// beside its floor, or the key itself.
func name(key string) string {
	if label, ok := figures[key]; ok {
		return label
	}
	if m := poolFloor.FindStringSubmatch(key); m != nil {
		if format, ok := poolFloorFigures[m[2]]; ok {
			return fmt.Sprintf(format, m[1])
		}
	}
	if m := writesByType.FindStringSubmatch(key); m != nil {
		if total, ok := figures[m[1]+" arm-writes/"+m[3]]; ok {
			return total + ": " + m[2]
		}
	}
	return key
}

var line = regexp.MustCompile(`^(Benchmark\S+?)(-\d+)?\s+\d+\s+\d+ ns/op((?:\s+[0-9.e+-]+ \S+)*)\s*$`)

func main() {
	log.SetFlags(0)
	if len(os.Args) != 2 {
		log.Fatal("usage: benchreport <go test -bench output>")
	}
	f, err := os.Open(os.Args[1])
	if err != nil {
		log.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	fmt.Println("| figure | value | benchmark |")
	fmt.Println("|---|---:|---|")
	sc := bufio.NewScanner(f)
	rows := 0
	for sc.Scan() {
		m := line.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		fields := strings.Fields(m[3])
		for i := 0; i+1 < len(fields); i += 2 {
			v, err := strconv.ParseFloat(fields[i], 64)
			if err != nil {
				continue
			}
			key := m[1] + " " + fields[i+1]
			label := name(key)
			fmt.Printf("| %s | %s | %s |\n", label, strconv.FormatFloat(v, 'f', -1, 64), key)
			rows++
		}
	}
	if rows == 0 {
		log.Fatal("benchreport: no benchmark figures in " + os.Args[1])
	}
}
