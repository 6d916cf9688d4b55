package render_test

import (
	"bytes"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/rmqtopo/rmqtopo/cmd/rmqtopo/flagwords"
	"github.com/rmqtopo/rmqtopo/plan"
	"github.com/rmqtopo/rmqtopo/render"
	"github.com/rmqtopo/rmqtopo/topology"
)

// fleet is n retrying work queues svc0..svc{n-1}, each with the objects
// rmqtopo generates for it (retry exchange, DLX, DLQ, two per-attempt
// wait queues and their bindings) and bound to the shared exchange
// "events", plus a policy: the shape of a large team's spec.
func fleet(n int, ttl int64) topology.Topology {
	t := topology.Topology{Vhosts: []string{"/"}, Exchanges: []topology.Exchange{exchange("events", "topic", nil)}}
	for i := range n {
		q := "svc" + strconv.Itoa(i)
		wait := func(attempt int, ms int64) topology.Queue {
			w := waitQueue(fmt.Sprintf("%s.wait.%d.%ds", q, attempt, ms/1000), ms)
			w.Arguments["x-dead-letter-routing-key"] = q
			return w
		}
		t.Exchanges = append(t.Exchanges,
			exchange(q+".retry", "headers", topology.Args{"alternate-exchange": q + ".dlx"}),
			exchange(q+".dlx", "fanout", nil))
		t.Queues = append(t.Queues,
			queue(q, topology.Args{"x-queue-type": "quorum", "x-dead-letter-exchange": q + ".dlx", "x-message-ttl": ttl}),
			queue(q+".dlq", topology.Args{"x-queue-type": "quorum"}),
			wait(1, 5000), wait(2, 30000))
		t.Bindings = append(t.Bindings,
			bind("events", q, q+".#", nil),
			bind(q+".dlx", q+".dlq", "", nil),
			bind(q+".retry", fmt.Sprintf("%s.wait.1.5s", q), "", attempt("1")),
			bind(q+".retry", fmt.Sprintf("%s.wait.2.30s", q), "", attempt("2")))
	}
	t.Policies = []topology.Policy{{Vhost: "/", Name: "svc-limits", Pattern: "^svc", ApplyTo: "queues",
		Definition: topology.Args{"max-length": int64(100000)}}}
	t.Sort()
	return t
}

// fleetPlan plans n queues against a broker that has svc1 with another
// TTL (a replace with 7 messages at stake) and an owned queue "legacy" that
// left the spec (a delete), with --prune and --allow-destroy.
func fleetPlan(n int) (plan.Plan, []plan.Diagnostic) {
	live := fleet(2, 60000)
	live.Queues = append(live.Queues, queue("legacy", nil))
	live.Sort()
	p := plan.DiffTopology(live, fleet(n, 3600000), plan.Options{Prune: true, Owned: owned(live),
		Messages: map[topology.Address]int64{queueAddr("svc1"): 7, queueAddr("svc0"): 0, queueAddr("legacy"): 0}})
	return p, flagwords.Diagnostics(plan.Check(p, plan.CheckOptions{AllowDestroy: true}))
}

// TestPlanMarkdownFleet: the pull-request plan of 3 and of 400 queues.
// At 3 everything fits; at 400 the whole plan is far beyond a GitHub
// comment, so the summary stays whole, groups are shown while they fit in
// render.MarkdownLimit, and the end counts what was left out.
func TestPlanMarkdownFleet(t *testing.T) {
	for _, n := range []int{3, 400} {
		t.Run(strconv.Itoa(n), func(t *testing.T) {
			p, diags := fleetPlan(n)
			var md, text bytes.Buffer
			if err := render.PlanMarkdown(&md, p, diags, cliMarkdown); err != nil {
				t.Fatal(err)
			}
			if err := render.PlanText(&text, p, diags, cliText(false)); err != nil {
				t.Fatal(err)
			}
			golden(t, fmt.Sprintf("fleet-%d.md.golden", n), md.Bytes())
			got := md.String()
			size := utf8.RuneCountInString(got)
			t.Logf("%d queues: %d changes, Markdown %d characters (text plan %d)", n, len(p.Changes)-p.CountActions().NoOp, size, text.Len())
			if size > render.MarkdownLimit {
				t.Errorf("Markdown plan is %d characters, over the limit of %d", size, render.MarkdownLimit)
			}
			checkFleetMarkdown(t, n, p, got)
		})
	}
}

func checkFleetMarkdown(t *testing.T, n int, p plan.Plan, got string) {
	t.Helper()
	summary, _, _ := strings.Cut(got, "**Changes by queue**")
	for _, want := range []string{"♻️ replace queue `svc1` in vhost `/`", "🗑️ delete queue `legacy` in vhost `/`", "`RT001`"} {
		if !strings.Contains(summary, want) {
			t.Errorf("the summary lacks %q", want)
		}
	}
	groups := regexp.MustCompile(`<summary>queue <code>(svc\d+)</code>`).FindAllStringSubmatch(got, -1)
	for i := 1; i < len(groups); i++ {
		a, _ := strconv.Atoi(strings.TrimPrefix(groups[i-1][1], "svc"))
		b, _ := strconv.Atoi(strings.TrimPrefix(groups[i][1], "svc"))
		if a+1 != b {
			t.Fatalf("group %s follows %s: not in natural order", groups[i][1], groups[i-1][1])
		}
	}
	total := len(p.Changes) - p.CountActions().NoOp
	shown := len(regexp.MustCompile(`(?m)^(\+|-|~|-/\+) (exchange|queue|binding|policy|vhost) "`).FindAllString(got, -1))
	left := regexp.MustCompile(`\*\*(\d+) of (\d+) changes are not shown here\*\*`).FindStringSubmatch(got)
	if n == 3 {
		if left != nil || len(groups) != n || shown != total {
			t.Errorf("3 queues: %d groups, %d of %d changes shown, left-out note %q", len(groups), shown, total, left)
		}
		return
	}
	if left == nil {
		t.Fatalf("400 queues: no note on the changes left out")
	}
	notShown, _ := strconv.Atoi(left[1])
	if left[2] != strconv.Itoa(total) || shown+notShown != total {
		t.Errorf("400 queues: %d shown + %s left out, want %d in all (note says %s)", shown, left[1], total, left[2])
	}
	if !strings.Contains(got, "`rmqtopo show -f json PLANFILE`") {
		t.Errorf("the note does not say where to see every change")
	}
}
