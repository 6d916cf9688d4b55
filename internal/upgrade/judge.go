package upgrade

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"

	"github.com/rmqtopo/rmqtopo/rabbitmq"
	"github.com/rmqtopo/rmqtopo/topology"
)

// Verdict is one thing the target refuses, ignores or does differently.
type Verdict struct {
	Code     string   `json:"code"`
	Severity Severity `json:"severity"`
	Effect   Effect   `json:"effect"`
	// Kind and Name are the object: queue, policy, operator-policy,
	// channel, vhost.
	Kind   string `json:"kind"`
	Name   string `json:"name"`
	Key    string `json:"key,omitempty"`
	Value  any    `json:"value,omitempty"`
	Detail string `json:"detail"`
	Advice string `json:"advice"`
	Cite   string `json:"cite,omitempty"`
}

// Report is the preview of one vhost.
type Report struct {
	Vhost    string           `json:"vhost"`
	Source   topology.Version `json:"-"`
	Target   topology.Version `json:"-"`
	Verdicts []Verdict        `json:"verdicts"`
	Route    Route            `json:"route"`
}

// Errors counts the verdicts of severity error.
func (r Report) Errors() int {
	n := 0
	for _, v := range r.Verdicts {
		if v.Severity == SeverityError {
			n++
		}
	}
	return n
}

// MarshalJSON writes the versions as strings.
func (r Report) MarshalJSON() ([]byte, error) {
	type plain Report
	return json.Marshal(struct {
		plain
		Source   string `json:"source_version"`
		Target   string `json:"target_version"`
		Errors   int    `json:"errors"`
		Warnings int    `json:"warnings"`
	}{plain(r), r.Source.String(), r.Target.String(), r.Errors(), len(r.Verdicts) - r.Errors()})
}

// Judge judges s against the target release as it installs (no plugin
// enabled).
func Judge(s Snapshot, target topology.Version) Report {
	return JudgeGreen(s, Green{Version: target})
}

// JudgeGreen judges s against the target g: its release, and the
// exchange types a live target broker has enabled when g has them.
func JudgeGreen(s Snapshot, g Green) Report {
	target := g.Version
	j := judge{s: s, target: target, green: g}
	for _, q := range s.Queues {
		j.queue(q)
	}
	for _, p := range s.Policies {
		j.policy(p)
	}
	j.bindings()
	j.exchanges()
	j.channels()
	j.consumerTimeouts()
	j.clientDeath()
	j.deprecated()
	sort.SliceStable(j.out, func(a, b int) bool {
		x, y := j.out[a], j.out[b]
		return x.Code < y.Code || x.Code == y.Code && x.Kind+x.Name+x.Key < y.Kind+y.Name+y.Key
	})
	return Report{Vhost: s.Vhost, Source: s.Version, Target: target, Verdicts: j.out, Route: PlanRoute(s, target)}
}

type judge struct {
	s      Snapshot
	target topology.Version
	green  Green
	out    []Verdict
}

func (j *judge) add(code, kind, name, key string, value any, detail, advice, cite string) {
	info, _ := LookupCode(code)
	j.out = append(j.out, Verdict{Code: code, Severity: info.Severity, Effect: info.Effect, Kind: kind, Name: name,
		Key: key, Value: value, Detail: detail, Advice: advice, Cite: cite})
}

func (j *judge) queue(q Queue) {
	if !q.Durable && !q.Exclusive {
		f, _ := topology.LookupFeature(topology.FeatureQueueProperty, "transient", nil)
		j.add(CodeTransientQueue, "queue", q.Name, "durable", false,
			fmt.Sprintf("a transient non-exclusive queue uses the deprecated feature %s; RabbitMQ %s permits it only while the feature is permitted (4.3.6 still permits it by default, though release-notes/4.3.0.md announces it denied)", f.Permit, j.target),
			"declare it durable (with x-expires for a queue that should go away), or exclusive; or keep deprecated_features.permit."+f.Permit+" = true on every node", f.Cite)
	}
	for _, k := range sortedKeys(q.Arguments) {
		j.argument(q, k, normalise(q.Arguments[k]))
	}
	j.deliveryLimit(q)
}

func (j *judge) argument(q Queue, key string, value any) {
	f, ok := topology.LookupFeature(topology.FeatureQueueArgument, key, value)
	if !ok || !f.AcceptsTypeAt(q.Type, j.target) {
		return
	}
	switch f.At(j.target) {
	case topology.Refused:
		advice := "redeclare the queue without it (a new queue: arguments are immutable) before the upgrade"
		if f.Permit != "" {
			advice += "; or " + f.PermitHint()
		}
		j.add(CodeArgumentRefused, "queue", q.Name, key, value, fmt.Sprintf("RabbitMQ %s refuses %s=%v (%s)", j.target, key, value, f.Span()), advice, f.Cite)
	case topology.Ignored:
		j.add(CodeArgumentIgnored, "queue", q.Name, key, value, fmt.Sprintf("RabbitMQ %s accepts %s=%v and does nothing with it", j.target, key, value),
			"drop it from the declaring application; a redeclare that still carries it keeps working", f.Cite)
	}
}

func (j *judge) policy(p Policy) {
	kind := "policy"
	if p.Operator {
		kind = "operator-policy"
	}
	for _, k := range sortedKeys(p.Definition) {
		v := normalise(p.Definition[k])
		f, ok := topology.LookupFeature(topology.FeaturePolicyKey, k, v)
		if !ok {
			continue
		}
		switch f.At(j.target) {
		case topology.Refused:
			advice := "remove the key from the policy before the upgrade"
			if strings.HasPrefix(k, "ha-") {
				advice = "mirrored classic queues are gone: move their queues to quorum queues (blue-green), then delete the policy"
			} else if f.Permit != "" {
				advice += "; or " + f.PermitHint()
			}
			j.add(CodePolicyKeyRefused, kind, p.Name, k, v, fmt.Sprintf("RabbitMQ %s refuses the policy key %s (%s)", j.target, k, f.Span()), advice, f.Cite)
		case topology.Ignored:
			j.add(CodePolicyKeyIgnored, kind, p.Name, k, v, fmt.Sprintf("RabbitMQ %s accepts the policy key %s and does nothing with it", j.target, k),
				"remove the key from the policy", f.Cite)
		}
	}
}

// deliveryLimit: the default limit of 4.0 and the nacks 4.3 no longer
// counts, for a quorum queue.
func (j *judge) deliveryLimit(q Queue) {
	if q.Type != "quorum" {
		return
	}
	limit, set := j.limitOf(q)
	b, _ := behaviour(DefaultDeliveryLimit)
	if !set && Changes(DefaultDeliveryLimit, j.s.Version, j.target) {
		j.add(CodeDefaultLimit, "queue", q.Name, "x-delivery-limit", nil,
			fmt.Sprintf("no delivery limit: on RabbitMQ %s the queue gets %d, and a message redelivered more often is dead-lettered, or dropped without a dead-letter exchange", j.target, rabbitmq.BrokerDeliveryLimit),
			"set a delivery limit on purpose: a delivery-limit policy (-1 for none, as before) or x-delivery-limit", b.Cite)
		limit, set = rabbitmq.BrokerDeliveryLimit, true
	}
	if set && limit >= 0 && Changes(NackNotCounted, j.s.Version, j.target) {
		nb, _ := behaviour(NackNotCounted)
		j.add(CodeNackNotCounted, "queue", q.Name, "delivery-limit", limit,
			fmt.Sprintf("on RabbitMQ %s basic.nack with requeue no longer counts toward the limit of %d: a consumer that nacks a poison message redelivers it forever", j.target, limit),
			"fail messages with basic.reject (requeue), which still counts, or dead-letter them (requeue=false)", nb.Cite)
	}
}

// limitOf is the queue's delivery limit: the lower of argument and
// effective policy, a negative one losing to a positive one.
func (j *judge) limitOf(q Queue) (int64, bool) {
	var got []int64
	for _, v := range []any{q.Arguments["x-delivery-limit"], q.Effective["delivery-limit"]} {
		if n, ok := normalise(v).(int64); ok {
			got = append(got, n)
		}
	}
	if len(got) == 0 {
		return 0, false
	}
	slices.Sort(got)
	for _, n := range got {
		if n >= 0 {
			return n, true
		}
	}
	return got[0], true
}

// normalise makes JSON numbers int64 where they are whole, as the version
// table compares them.
func normalise(v any) any {
	switch n := v.(type) {
	case float64:
		if n == math.Trunc(n) {
			return int64(n)
		}
	case json.Number:
		if i, err := n.Int64(); err == nil {
			return i
		}
	case int:
		return int64(n)
	}
	return v
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
