package clustertest

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rmqtopo/rmqtopo/internal/brokertest"
)

// benchSpecBody is internal/broker's BenchmarkPlanApply topology: QUEUES
// classic work queues with 5 per-attempt wait queues each (1,000: 2,001
// exchanges, 7,000 queues, 7,000 bindings, ~16,000 objects).
func benchSpecBody(queues int) string {
	var sb strings.Builder
	sb.WriteString("layout: per-attempt\nexchanges:\n  - {name: biz, type: topic}\nqueues:\n")
	for i := 0; i < queues; i++ {
		fmt.Fprintf(&sb, "  - name: svc%04d.work\n    bindings: [{exchange: biz, routing_key: \"k.%d\"}]\n    retry: {exponential: {initial: 1s, factor: 2, attempts: 5}}\n", i, i)
	}
	return sb.String()
}

// BenchmarkApplyClusterVsNode times `rmqtopo apply` from empty of the
// ~16,000-object topology, the real binary end to end (read, plan, lock,
// writes), against one node (the harness broker) and against the 3-node
// cluster through its first node, in the same run, then a plan with no
// changes against each. It does each step once whatever b.N is; run it
// with -benchtime 1x. RMQTOPO_BENCH_QUEUES scales the spec.
func BenchmarkApplyClusterVsNode(b *testing.B) {
	queues := 1000
	if v, err := strconv.Atoi(os.Getenv("RMQTOPO_BENCH_QUEUES")); err == nil && v > 0 {
		queues = v
	}
	single := brokertest.Get(b)
	clustered := brokertest.GetCluster(b).Brokers[0]
	dir := b.TempDir()
	timeCLI := func(want int, args ...string) time.Duration {
		start := time.Now()
		must(b, want, args...)
		return time.Since(start)
	}
	report := func(v float64, unit string) {
		b.ReportMetric(v, unit)
		fmt.Fprintf(os.Stderr, "  %-18s %10.3f\n", unit, v)
	}
	var applies, plans []time.Duration
	for i, bk := range []*brokertest.Broker{single, clustered} {
		vhost := bk.NewVhost(b)
		path := writeSpec(b, dir, fmt.Sprintf("bench%d.yaml", i), vhost, benchSpecBody(queues))
		applies = append(applies, timeCLI(0, append([]string{"apply", "--auto-approve", path}, conn(bk)...)...))
		plans = append(plans, timeCLI(0, append([]string{"plan", "--detailed-exitcode", path}, conn(bk)...)...))
	}
	fmt.Fprintf(os.Stderr, "BenchmarkApplyClusterVsNode: %d work queues (%d objects)\n", queues, queues*16+1)
	report(applies[0].Seconds(), "apply-node-s")
	report(applies[1].Seconds(), "apply-cluster-s")
	report(applies[1].Seconds()/applies[0].Seconds(), "cluster/node")
	report(plans[0].Seconds(), "plan-node-s")
	report(plans[1].Seconds(), "plan-cluster-s")
}
