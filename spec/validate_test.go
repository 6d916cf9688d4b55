package spec

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

var update = flag.Bool("update", false, "rewrite testdata/invalid/*.errors from the current output (review the diff!)")

// TestInvalidFixtures loads every spec in testdata/invalid, each of which
// has exactly one kind of problem, and compares the errors with the
// sidecar .errors file: one "file:line:column: path: message" per line.
func TestInvalidFixtures(t *testing.T) {
	paths, err := filepath.Glob("testdata/invalid/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(paths) < 50 {
		t.Fatalf("found %d invalid fixtures; the glob is probably wrong", len(paths))
	}
	for _, path := range paths {
		name := filepath.Base(path)
		t.Run(strings.TrimSuffix(name, ".yaml"), func(t *testing.T) {
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			f, err := Parse(name, data)
			if f != nil {
				t.Errorf("Parse returned a file for an invalid spec")
			}
			var es Errors
			if !errors.As(err, &es) {
				t.Fatalf("Parse error = %v (%T), want Errors", err, err)
			}
			checkPositions(t, name, es)
			got := errorLines(es)
			sidecar := strings.TrimSuffix(path, ".yaml") + ".errors"
			if *update {
				if err := os.WriteFile(sidecar, []byte(strings.Join(got, "\n")+"\n"), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			wantData, err := os.ReadFile(sidecar)
			if err != nil {
				t.Fatalf("%v (run with -update to create it, then review it)", err)
			}
			want := strings.Split(strings.TrimRight(string(wantData), "\n"), "\n")
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("errors of %s (-want +got):\n%s", name, diff)
			}
		})
	}
}

func errorLines(es Errors) []string {
	out := make([]string, len(es))
	for i, e := range es {
		out[i] = e.Error()
	}
	return out
}

// checkPositions fails unless every error points into file at a real
// position.
func checkPositions(t *testing.T, file string, es Errors) {
	t.Helper()
	if len(es) == 0 {
		t.Errorf("no errors")
	}
	for _, e := range es {
		if e.File != file || e.Line < 1 || e.Column < 1 {
			t.Errorf("error without a position in %s: %#v", file, e)
		}
		if e.Message == "" {
			t.Errorf("error without a message: %#v", e)
		}
	}
}

// TestValidationMessages pins, for each kind of bad input the CLI promises
// to catch, the exact position and path, independent of message wording.
func TestValidationMessages(t *testing.T) {
	tests := []struct {
		name string
		spec string
		// want is "line:column path" for each error, in order.
		want []string
		// contains is a fragment of each message, in order.
		contains []string
	}{
		{
			name: "malformed YAML",
			spec: "version: 1\nqueues: [\n",
			want: []string{"2:9 "}, contains: []string{"invalid YAML"},
		},
		{
			// yaml.v3 places these at the enclosing block (4:1, 3:1, 4:1);
			// the position is the token at fault (syntaxPosition).
			name: "unclosed flow mapping",
			spec: "version: 1\nname: shop\nqueues:\n  - name: orders\n    retry: {delays: [1s, 5s]\n  - name: payments\n",
			want: []string{"6:3 "}, contains: []string{"did not find expected ',' or '}'"},
		},
		{
			name: "misindented key",
			spec: "version: 1\nname: shop\nqueues:\n  - name: orders\n    retry:\n      delays: [1s, 5s]\n     bad: x\n",
			want: []string{"7:6 "}, contains: []string{"invalid YAML"},
		},
		{
			name: "unterminated quote",
			spec: "version: 1\nname: shop\nqueues:\n  - name: \"orders\n",
			want: []string{"4:11 "}, contains: []string{"invalid YAML"},
		},
		{
			name: "unknown key",
			spec: "version: 1\nqueues:\n  - name: a\n    colour: red\n",
			want: []string{"4:5 queues[0].colour"}, contains: []string{`unknown key "colour"`},
		},
		{
			name: "wrong type",
			spec: "version: 1\nqueues:\n  - name: a\n    immediate_retries: [1]\n",
			want: []string{"4:24 queues[0].immediate_retries"}, contains: []string{"expected a whole number, got a list"},
		},
		{
			name: "negative delay",
			spec: "version: 1\nqueues:\n  - name: a\n    retry: {delays: [1s, -2s]}\n",
			want: []string{"4:26 queues[0].retry.delays[1]"}, contains: []string{"must be positive"},
		},
		{
			name: "zero delay",
			spec: "version: 1\nqueues:\n  - name: a\n    retry: {fixed: {delay: 0ms, attempts: 2}}\n",
			want: []string{"4:28 queues[0].retry.fixed.delay"}, contains: []string{"must be positive"},
		},
		{
			name: "non-numeric delay",
			spec: "version: 1\nqueues:\n  - name: a\n    retry: {linear: {step: often, attempts: 2}}\n",
			want: []string{"4:28 queues[0].retry.linear.step"}, contains: []string{`invalid duration "often"`},
		},
		{
			name: "delay over the TTL maximum",
			spec: "version: 1\nqueues:\n  - name: a\n    retry: {exponential: {initial: 1s, factor: 2, max: 87600h1ms, attempts: 2}}\n",
			want: []string{"4:56 queues[0].retry.exponential.max"}, contains: []string{"maximum TTL of 10 years"},
		},
		{
			name: "delay exactly the TTL maximum is fine",
			spec: "version: 1\nqueues:\n  - name: a\n    retry: {delays: [87600h]}\n",
		},
		{
			name: "factor of 1 with a cap",
			spec: "version: 1\nqueues:\n  - name: a\n    retry: {exponential: {initial: 1s, factor: 1, max: 1m, attempts: 2}}\n",
			want: []string{"4:48 queues[0].retry.exponential.factor"}, contains: []string{"greater than 1"},
		},
		{
			name: "factor of 1 without a cap is a fixed schedule",
			spec: "version: 1\nqueues:\n  - name: a\n    retry: {exponential: {initial: 1s, factor: 1, attempts: 2}}\n",
		},
		{
			name: "unknown policy reference",
			spec: "version: 1\nretry_policies:\n  slow: {delays: [1m]}\nqueues:\n  - name: a\n    retry: fast\n",
			want: []string{"6:12 queues[0].retry"}, contains: []string{`unknown retry policy "fast" (known: slow)`},
		},
		{
			name: "duplicate queue",
			spec: "version: 1\nqueues:\n  - name: a\n  - name: b\n  - name: a\n",
			want: []string{"5:11 queues[2].name"}, contains: []string{`duplicate queue "a" (first declared at queues[0])`},
		},
		{
			// The duplicate is skipped, not the queue it repeats.
			name:     "duplicate of a queue with a problem",
			spec:     "version: 1\nqueues:\n  - name: a\n  - name: b\n    delivery_limit: 3\n  - name: b\n",
			want:     []string{"5:21 queues[1].delivery_limit", "6:11 queues[2].name"},
			contains: []string{"delivery_limit needs a quorum queue", `duplicate queue "b" (first declared at queues[1])`},
		},
		{
			name: "name over 255 bytes",
			spec: "version: 1\nqueues:\n  - name: " + strings.Repeat("x", 256) + "\n    dlq: false\n",
			want: []string{"3:11 queues[0].name"}, contains: []string{"is 256 bytes; RabbitMQ allows 255"},
		},
		{
			name: "quorum name over 255 bytes with its vhost",
			spec: "version: 1\nvhost: orders-eu1\nqueues:\n  - name: " + strings.Repeat("x", 245) + "\n    type: quorum\n    dlq: false\n",
			want: []string{"4:11 queues[0].name"}, contains: []string{"must fit in 255 bytes, and is 256"},
		},
		{
			name: "quorum name of exactly 255 bytes with its vhost",
			spec: "version: 1\nvhost: orders-eu1\nqueues:\n  - name: " + strings.Repeat("x", 244) + "\n    type: quorum\n    dlq: false\n",
		},
		{
			name: "amq. prefix",
			spec: "version: 1\nexchanges:\n  - {name: amq.mine, type: topic}\n",
			want: []string{"3:12 exchanges[0].name"}, contains: []string{`prefix "amq."`},
		},
		{
			name:     "queue named like another queue's wait queue",
			spec:     "version: 1\nqueues:\n  - name: a\n    layout: per-attempt\n    retry: {delays: [3s]}\n  - name: a.wait.1.3s\n    dlq: false\n",
			want:     []string{"3:11 queues[0].name"},
			contains: []string{`queue "a.wait.1.3s" (generated for queue "a" as its wait queue for retry 1) collides with the queue declared at queues[1]`},
		},
		{
			name: "queue named like another queue's DLQ",
			spec: "version: 1\nqueues:\n  - name: a\n  - name: a.dlq\n    dlq: false\n",
			want: []string{"3:11 queues[0].name"}, contains: []string{`queue "a.dlq" (generated for queue "a" as its DLQ) collides with the queue declared at queues[1]`},
		},
		{
			name: "dlq_name colliding with a declared queue",
			spec: "version: 1\nqueues:\n  - name: a\n    dlq_name: b\n  - name: b\n    dlq: false\n",
			want: []string{"4:15 queues[0].dlq_name"}, contains: []string{`queue "b" (generated for queue "a" as its DLQ) collides with the queue declared at queues[1]`},
		},
		{
			name: "dlq_name colliding with another queue's wait queue",
			spec: "version: 1\nqueues:\n  - name: a\n    layout: per-attempt\n    retry: {delays: [3s]}\n  - name: b\n    dlq_name: a.wait.1.3s\n",
			want: []string{"7:15 queues[1].dlq_name"}, contains: []string{`queue "a.wait.1.3s" (generated for queue "b" as its DLQ) collides with`},
		},
		{
			name: "dlq_name not a valid queue name",
			spec: "version: 1\nqueues:\n  - name: a\n    dlq_name: amq.failed\n",
			want: []string{"4:15 queues[0].dlq_name"}, contains: []string{`prefix "amq."`},
		},
		{
			name: "dlq_name empty",
			spec: "version: 1\nqueues:\n  - name: a\n    dlq_name: \"\"\n",
			want: []string{"4:15 queues[0].dlq_name"}, contains: []string{"name must not be empty"},
		},
		{
			name: "dlq_name without a DLQ",
			spec: "version: 1\nqueues:\n  - name: a\n    dlq: false\n    dlq_name: a.failed\n",
			want: []string{"5:15 queues[0].dlq_name"}, contains: []string{"dlq_name needs a DLQ"},
		},
		{
			name: "dlq_name on a preset",
			spec: "version: 1\nqueues:\n  - name: a\n    preset: outbox\n    retry: {delays: [1s]}\n    dlq_name: a.failed\n",
			want: []string{"6:15 queues[0].dlq_name"}, contains: []string{"does not apply to a queue with preset outbox"},
		},
		{
			name: "dlq_name on a raw queue",
			spec: "version: 1\nqueues:\n  - name: a\n    raw: true\n    dlq_name: a.failed\n",
			want: []string{"5:15 queues[0].dlq_name"}, contains: []string{"dlq_name does not apply to a raw queue"},
		},
		{
			name: "retire a queue the spec declares",
			spec: "version: 1\nqueues:\n  - name: a\n    retire: [a.retry, b]\n  - name: b\n    dlq: false\n",
			want: []string{"4:23 queues[0].retire[1]"}, contains: []string{`queue "b" is retired by queue "a", but the spec keeps it: it is the queue declared at queues[1]`},
		},
		{
			name: "retire a queue the spec generates",
			spec: "version: 1\nqueues:\n  - name: a\n    retire: [a.dlq]\n",
			want: []string{"4:14 queues[0].retire[0]"}, contains: []string{`queue "a.dlq" is retired by queue "a", but the spec keeps it: it is the queue generated for queue "a" as its DLQ`},
		},
		{
			name: "retire twice, and amq.",
			spec: "version: 1\nqueues:\n  - name: a\n    retire: [r, amq.r]\n  - name: b\n    retire: [r]\n",
			want: []string{"4:17 queues[0].retire[1]", "6:14 queues[1].retire[0]"}, contains: []string{`prefix "amq."`, `queue "r" is retired by queue "a" and by queue "b"`},
		},
		{
			name: "retire on a raw queue",
			spec: "version: 1\nqueues:\n  - name: a\n    raw: true\n    retire: [r]\n",
			want: []string{"5:13 queues[0].retire"}, contains: []string{"retire does not apply to a raw queue"},
		},
		{
			name: "delivery_limit on a classic queue",
			spec: "version: 1\nqueues:\n  - name: a\n    delivery_limit: 3\n",
			want: []string{"4:21 queues[0].delivery_limit"}, contains: []string{"needs a quorum queue"},
		},
		{
			name:     "all errors at once, sorted by position",
			spec:     "version: 1\nqueues:\n  - name: a\n    retry: {delays: [0s, 2]}\n    colour: red\n  - name: a\n",
			want:     []string{"4:22 queues[0].retry.delays[0]", "4:26 queues[0].retry.delays[1]", "5:5 queues[0].colour", "6:11 queues[1].name"},
			contains: []string{"must be positive", "needs a unit", "unknown key", "duplicate queue"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse("spec.yaml", []byte(tt.spec))
			var es Errors
			if err != nil && !errors.As(err, &es) {
				t.Fatalf("Parse error = %v (%T), want Errors", err, err)
			}
			var got, gotMsgs []string
			for _, e := range es {
				if e.File != "spec.yaml" {
					t.Errorf("File = %q, want spec.yaml", e.File)
				}
				got = append(got, fmt.Sprintf("%d:%d %s", e.Line, e.Column, e.Path))
				gotMsgs = append(gotMsgs, e.Message)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Fatalf("error positions (-want +got):\n%s\nerrors:\n%v", diff, err)
			}
			for i, frag := range tt.contains {
				if !strings.Contains(gotMsgs[i], frag) {
					t.Errorf("error %d = %q, want it to contain %q", i, gotMsgs[i], frag)
				}
			}
		})
	}
}

// TestArgumentsOfTheirType: the key table's queue types, which the broker
// holds (TestKeyTableAgainstBroker): a quorum queue takes
// x-consumer-disconnected-timeout (spec validation once called it
// unknown), a stream x-initial-cluster-size (which a quorum queue refuses).
func TestArgumentsOfTheirType(t *testing.T) {
	data := []byte(`version: 1
queues:
  - name: votes
    type: quorum
    raw: true
    arguments:
      x-consumer-disconnected-timeout: 60000
      x-quorum-initial-group-size: 3
  - name: ticks
    type: stream
    raw: true
    arguments:
      x-initial-cluster-size: 3
  - name: scratch
    raw: true
    arguments:
      x-dead-letter-exchange: dead
      x-dead-letter-routing-key: scratch
`)
	if _, err := Parse("types.yaml", data); err != nil {
		t.Fatal(err)
	}
}
