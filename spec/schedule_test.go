package spec

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

const (
	ms = time.Millisecond
	s  = time.Second
	m  = time.Minute
	h  = time.Hour
)

func TestDelays(t *testing.T) {
	tests := []struct {
		name  string
		retry string
		want  []time.Duration
	}{
		{"explicit list", "delays: [2s, 5s, 15s]", []time.Duration{2 * s, 5 * s, 15 * s}},
		{"explicit list keeps order and repeats", "delays: [1m, 1500ms, 1m]", []time.Duration{m, 1500 * ms, m}},
		{"explicit empty list is no retries", "delays: []", []time.Duration{}},
		{"fixed", "fixed: {delay: 5s, attempts: 3}", []time.Duration{5 * s, 5 * s, 5 * s}},
		{"fixed zero attempts", "fixed: {delay: 5s, attempts: 0}", []time.Duration{}},
		{"linear", "linear: {step: 1m, attempts: 4}", []time.Duration{m, 2 * m, 3 * m, 4 * m}},
		{"linear sub-second step", "linear: {step: 250ms, attempts: 3}", []time.Duration{250 * ms, 500 * ms, 750 * ms}},
		{
			"exponential capped (the issue's example)",
			"exponential: {initial: 1s, factor: 10, max: 500s, attempts: 5}",
			[]time.Duration{s, 10 * s, 100 * s, 500 * s, 500 * s},
		},
		{
			"exponential uncapped",
			"exponential: {initial: 1s, factor: 2, attempts: 5}",
			[]time.Duration{s, 2 * s, 4 * s, 8 * s, 16 * s},
		},
		{
			"exponential fractional factor rounds to milliseconds",
			"exponential: {initial: 100ms, factor: 1.5, attempts: 4}",
			[]time.Duration{100 * ms, 150 * ms, 225 * ms, 338 * ms},
		},
		{
			"exponential factor 1 without cap is fixed",
			"exponential: {initial: 3s, factor: 1, attempts: 3}",
			[]time.Duration{3 * s, 3 * s, 3 * s},
		},
		{
			"exponential cap equal to initial",
			"exponential: {initial: 1m, factor: 2, max: 1m, attempts: 2}",
			[]time.Duration{m, m},
		},
		{
			"exponential uncapped stops at RabbitMQ's TTL maximum",
			"exponential: {initial: 1h, factor: 1000, attempts: 4}",
			[]time.Duration{h, 1000 * h, MaxTTL, MaxTTL},
		},
		{
			"exponential huge factor does not overflow",
			"exponential: {initial: 1s, factor: 1e300, attempts: 3}",
			[]time.Duration{s, MaxTTL, MaxTTL},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := mustParse(t, "spec.yaml", "version: 1\nqueues:\n  - name: q\n    retry: {"+tt.retry+"}\n")
			got := f.Spec.Queues[0].Retry.Delays()
			if diff := cmp.Diff(tt.want, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("Delays() (-want +got):\n%s", diff)
			}
		})
	}
}

func TestNamedRetryPolicies(t *testing.T) {
	f := mustParse(t, "spec.yaml", `version: 1
retry_policies:
  quick: {fixed: {delay: 5s, attempts: 2}}
  slow: {linear: {step: 1m, attempts: 2}}
queues:
  - name: a
    retry: slow
  - name: b
    retry: quick
  - name: c
`)
	qs := f.Spec.Queues
	got := map[string][]time.Duration{}
	refs := map[string]string{}
	for _, q := range qs {
		got[q.Name] = q.Retry.Delays()
		refs[q.Name] = q.RetryRef
	}
	want := map[string][]time.Duration{"a": {m, 2 * m}, "b": {5 * s, 5 * s}, "c": nil}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("delays (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]string{"a": "slow", "b": "quick", "c": ""}, refs); diff != "" {
		t.Errorf("RetryRef (-want +got):\n%s", diff)
	}
}

func TestSchedule(t *testing.T) {
	tests := []struct {
		name string
		spec string
		want []Step
	}{
		{
			name: "outbox example: 0s, 2s, 7s, 22s, then the DLQ",
			spec: "version: 1\nqueues:\n  - name: demo.order_processor\n    type: quorum\n    retry:\n      delays: [2s, 5s, 15s]\n",
			want: []Step{
				{Attempt: 1, Delay: 0, Elapsed: 0, Via: "", OnFailure: "rmqtopo.wait.2s"},
				{Attempt: 2, Delay: 2 * s, Elapsed: 2 * s, Via: "rmqtopo.wait.2s", OnFailure: "rmqtopo.wait.5s"},
				{Attempt: 3, Delay: 5 * s, Elapsed: 7 * s, Via: "rmqtopo.wait.5s", OnFailure: "rmqtopo.wait.15s"},
				{Attempt: 4, Delay: 15 * s, Elapsed: 22 * s, Via: "rmqtopo.wait.15s", OnFailure: "demo.order_processor.dlq"},
			},
		},
		{
			name: "zero retries: failure goes straight to the DLQ",
			spec: "version: 1\nqueues:\n  - name: audit\n    retry: {delays: []}\n",
			want: []Step{{Attempt: 1, OnFailure: "audit.dlq"}},
		},
		{
			name: "no retry policy at all",
			spec: "version: 1\nqueues:\n  - name: audit\n",
			want: []Step{{Attempt: 1, OnFailure: "audit.dlq"}},
		},
		{
			name: "no DLQ: the last failure is discarded",
			spec: "version: 1\nqueues:\n  - name: q\n    dlq: false\n    retry: {delays: [1s]}\n",
			want: []Step{
				{Attempt: 1, OnFailure: "rmqtopo.wait.1s"},
				{Attempt: 2, Delay: s, Elapsed: s, Via: "rmqtopo.wait.1s", OnFailure: "discarded"},
			},
		},
		{
			name: "immediate retries come first, back of the work queue",
			spec: "version: 1\nqueues:\n  - name: q\n    immediate_retries: 2\n    layout: per-attempt\n    retry: {delays: [30s, 2m]}\n",
			want: []Step{
				{Attempt: 1, OnFailure: "q"},
				{Attempt: 2, Via: "q", OnFailure: "q"},
				{Attempt: 3, Via: "q", OnFailure: "q.wait.3.30s"},
				{Attempt: 4, Delay: 30 * s, Elapsed: 30 * s, Via: "q.wait.3.30s", OnFailure: "q.wait.4.2m"},
				{Attempt: 5, Delay: 2 * m, Elapsed: 2*m + 30*s, Via: "q.wait.4.2m", OnFailure: "q.dlq"},
			},
		},
		{
			name: "vhost layout applies when the queue has none",
			spec: "version: 1\nlayout: per-attempt\nqueues:\n  - name: q\n    retry: {fixed: {delay: 1s, attempts: 2}}\n",
			want: []Step{
				{Attempt: 1, OnFailure: "q.wait.1.1s"},
				{Attempt: 2, Delay: s, Elapsed: s, Via: "q.wait.1.1s", OnFailure: "q.wait.2.1s"},
				{Attempt: 3, Delay: s, Elapsed: 2 * s, Via: "q.wait.2.1s", OnFailure: "q.dlq"},
			},
		},
		{
			name: "queue layout overrides the vhost's",
			spec: "version: 1\nlayout: per-attempt\nqueues:\n  - name: q\n    layout: shared\n    retry: {delays: [1s]}\n",
			want: []Step{
				{Attempt: 1, OnFailure: "rmqtopo.wait.1s"},
				{Attempt: 2, Delay: s, Elapsed: s, Via: "rmqtopo.wait.1s", OnFailure: "q.dlq"},
			},
		},
		{
			name: "goqueue preset",
			spec: "version: 1\nqueues:\n  - name: ev\n    preset: goqueue\n    retry: {delays: [1s, 2s]}\n",
			want: []Step{
				{Attempt: 1, OnFailure: "ev__retry.1"},
				{Attempt: 2, Delay: s, Elapsed: s, Via: "ev__retry.1", OnFailure: "ev__retry.2"},
				{Attempt: 3, Delay: 2 * s, Elapsed: 3 * s, Via: "ev__retry.2", OnFailure: "ev.dlq"},
			},
		},
		{
			name: "outbox preset",
			spec: "version: 1\nqueues:\n  - name: demo\n    type: quorum\n    preset: outbox\n    retry: {delays: [2s, 5s]}\n",
			want: []Step{
				{Attempt: 1, OnFailure: "demo.delay_2s"},
				{Attempt: 2, Delay: 2 * s, Elapsed: 2 * s, Via: "demo.delay_2s", OnFailure: "demo.delay_5s"},
				{Attempt: 3, Delay: 5 * s, Elapsed: 7 * s, Via: "demo.delay_5s", OnFailure: "demo.dlq"},
			},
		},
		{
			name: "spring preset",
			spec: "version: 1\nqueues:\n  - name: some.queue\n    preset: spring\n    retry: {exponential: {initial: 1s, factor: 10, max: 500s, attempts: 3}}\n",
			want: []Step{
				{Attempt: 1, OnFailure: "wait-queue-1s"},
				{Attempt: 2, Delay: s, Elapsed: s, Via: "wait-queue-1s", OnFailure: "wait-queue-10s"},
				{Attempt: 3, Delay: 10 * s, Elapsed: 11 * s, Via: "wait-queue-10s", OnFailure: "wait-queue-100s"},
				{Attempt: 4, Delay: 100 * s, Elapsed: 111 * s, Via: "wait-queue-100s", OnFailure: "some.queue.dlq"},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := mustParse(t, "spec.yaml", tt.spec)
			got := f.Spec.Schedule(f.Spec.Queues[0])
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Schedule (-want +got):\n%s", diff)
			}
		})
	}
}

// TestScheduleMatchesTopology checks, for every example, that each "waits
// in" of the schedule is a queue the expansion creates (or, in the levels
// layout, the ladder's entry exchange), and each final destination is the
// DLQ it creates.
func TestScheduleMatchesTopology(t *testing.T) {
	for _, path := range examplePaths(t) {
		files, err := LoadFiles(path)
		if err != nil {
			t.Fatal(err)
		}
		top := Expand(files...)
		s := &files[0].Spec
		for _, q := range s.Queues {
			for _, step := range s.Schedule(q) {
				for _, name := range []string{step.Via, step.OnFailure} {
					if name == "" || name == "discarded" {
						continue
					}
					if _, ok := top.Exchange(s.Vhost, name); ok && s.layoutOf(q) == LayoutLevels {
						continue // the delay ladder's entry: the delay picks the levels
					}
					if _, ok := top.Queue(s.Vhost, name); !ok {
						t.Errorf("%s: queue %s attempt %d names %q, which the topology does not declare", path, q.Name, step.Attempt, name)
					}
				}
			}
		}
	}
}
