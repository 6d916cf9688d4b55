package spec

import (
	"math"
	"slices"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/rmqtopo/rmqtopo/topology"
)

func (d *decoder) spec(n *yaml.Node) *Spec {
	s := &Spec{Vhost: "/", at: at(n, "")}
	hasVersion := false
	ok := specObject.decode(d, n, "", s, func(k string, _ *yaml.Node, _ string) { hasVersion = hasVersion || k == "version" })
	if ok && !hasVersion {
		d.add(at(n, ""), "missing \"version: %d\"", Version)
	}
	d.resolveRetryRefs(s)
	return s
}

// specVersion reads s's format version, an error unless it is Version.
func (d *decoder) specVersion(s *Spec, v *yaml.Node, p string) {
	var ver int64
	before := len(d.errs)
	d.integer(v, p, math.MinInt32, math.MaxInt32, &ver)
	if len(d.errs) == before && ver != Version {
		d.add(at(v, p), "unsupported version %d: this rmqtopo reads version %d", ver, Version)
	}
	s.Version = int(ver)
}

// specName reads s's name, an error unless it can name an ownership record.
func (d *decoder) specName(s *Spec, v *yaml.Node, p string) {
	d.str(v, p, &s.Name)
	if !validSpecName(s.Name) {
		d.add(at(v, p), "name %s: want 1 to %d letters, digits, '.', '_' or '-', starting with a letter or digit (it names the spec's ownership record)",
			Quote(s.Name), maxSpecName)
	}
}

// specVhost reads s's vhost, an error when empty or longer than RabbitMQ
// allows.
func (d *decoder) specVhost(s *Spec, v *yaml.Node, p string) {
	d.str(v, p, &s.Vhost)
	if s.Vhost == "" {
		d.add(at(v, p), "vhost must not be empty")
	}
	if len(s.Vhost) > topology.MaxNameBytes {
		d.add(at(v, p), "vhost name %q is %d bytes; RabbitMQ allows %d", s.Vhost, len(s.Vhost), topology.MaxNameBytes)
	}
}

// retryPolicies reads s's named retry policies in order, an error for
// each name given twice.
func (d *decoder) retryPolicies(s *Spec, v *yaml.Node, p string) {
	if v.Kind != yaml.MappingNode {
		d.add(at(v, p), "expected a mapping of policy names to retry policies, got %s", describe(v))
		return
	}
	for i := 0; i+1 < len(v.Content); i += 2 {
		name, body := v.Content[i].Value, v.Content[i+1]
		pp := join(p, name)
		for _, prev := range s.RetryPolicies {
			if prev.Name == name {
				d.add(at(v.Content[i], pp), "duplicate retry policy %q", name)
			}
		}
		s.RetryPolicies = append(s.RetryPolicies, NamedRetryPolicy{Name: name, Policy: d.retryPolicy(body, pp)})
	}
}

// specQueues reads s's queues, from the pre-split list when v is the one
// d split ahead, with room for them all made once.
func (d *decoder) specQueues(s *Spec, v *yaml.Node, p string) {
	if d.queues != nil && v == d.queues.value {
		s.Queues = slices.Grow(s.Queues, len(d.queues.items))
		d.queues.each(func(i int, e *yaml.Node) { s.Queues = append(s.Queues, d.queue(e, index(p, i), s)) })
		return
	}
	if v.Kind == yaml.SequenceNode { // sized once: a Queue is large and specs can hold 100,000s
		s.Queues = slices.Grow(s.Queues, len(v.Content))
	}
	d.list(v, p, func(_ int, e *yaml.Node, ep string) { s.Queues = append(s.Queues, d.queue(e, ep, s)) })
}

func (d *decoder) layout(n *yaml.Node, path string) Layout {
	var v string
	d.str(n, path, &v)
	if slices.Contains(layouts, v) {
		return Layout(v)
	}
	if n.Kind == yaml.ScalarNode {
		d.add(at(n, path), "unknown layout %q (expected %s)", v, orList(layouts))
	}
	return ""
}

func (d *decoder) queueType(n *yaml.Node, path string) string {
	var v string
	d.str(n, path, &v)
	if slices.Contains(queueTypes, v) {
		return v
	}
	if n.Kind == yaml.ScalarNode {
		d.add(at(n, path), "unknown queue type %q (expected %s)", v, orList(queueTypes))
	}
	return ""
}

func (d *decoder) exchange(n *yaml.Node, path string) Exchange {
	e := Exchange{Durable: true, at: at(n, path), nameAt: at(n, path)}
	hasName, hasType := false, false
	ok := exchangeObject.decode(d, n, path, &e, func(k string, _ *yaml.Node, _ string) {
		hasName = hasName || k == "name"
		hasType = hasType || k == "type"
	})
	if ok && !hasName {
		d.add(e.at, "exchange needs a name")
	}
	if ok && !hasType {
		d.add(e.at, "exchange needs a type (direct, fanout, topic or headers)")
	}
	return e
}

// exchangeTypes are the exchange types RabbitMQ has built in; a plugin's
// start with x-.
var exchangeTypes = []string{"direct", "fanout", "topic", "headers"}

func (d *decoder) exchangeType(n *yaml.Node, path string) string {
	var v string
	d.str(n, path, &v)
	if !slices.Contains(exchangeTypes, v) && !strings.HasPrefix(v, "x-") && n.Kind == yaml.ScalarNode {
		d.add(at(n, path), "unknown exchange type %q (expected direct, fanout, topic, headers or a plugin's x- type)", v)
	}
	return v
}

func (d *decoder) binding(n *yaml.Node, path string) Binding {
	b := Binding{at: at(n, path)}
	has := false
	ok := bindingObject.decode(d, n, path, &b, func(k string, _ *yaml.Node, _ string) { has = has || k == "exchange" })
	if ok && !has {
		d.add(b.at, "binding needs an exchange")
	}
	return b
}

// newQueue is a queue before its keys are read: what each key absent
// means.
func newQueue() Queue { return Queue{Type: TypeClassic, DLQ: true, Durable: true} }

func (d *decoder) queue(n *yaml.Node, path string, s *Spec) Queue {
	q := newQueue()
	q.at, q.nameAt = at(n, path), at(n, path)
	hasName := false
	var optsNode *yaml.Node
	var optsPath string
	ok := queueObject.decode(d, n, path, &q, func(k string, v *yaml.Node, p string) {
		q.set = append(q.set, keyAt{k, at(v, p)})
		switch k {
		case keyName:
			hasName = true
		case keyPresetOptions:
			optsNode, optsPath = v, p
		}
	})
	if ok && !hasName {
		d.add(q.at, "queue needs a name")
	}
	if q.Raw {
		// A raw queue has no DLQ; everything that reads DLQ sees that.
		q.DLQ = false
	}
	if optsNode != nil {
		q.PresetOptions = d.presetOptions(optsNode, optsPath, q.Preset)
	}
	return q
}

func decodeQueueType(d *decoder, _ *fieldDoc, q *Queue, v *yaml.Node, p string) {
	if v.Kind == yaml.ScalarNode && v.Value == TypeStream {
		q.Type = TypeStream
		return
	}
	q.Type = d.queueType(v, p)
}

// decodeQueueRetry reads a queue's retry: a policy's name, resolved once
// the spec is read, or a policy.
func decodeQueueRetry(d *decoder, _ *fieldDoc, q *Queue, v *yaml.Node, p string) {
	q.retryAt = at(v, p)
	if v.Kind == yaml.ScalarNode && v.Tag == "!!str" {
		q.RetryRef = v.Value
		return
	}
	q.Retry = d.retryPolicy(v, p)
}

func decodePreset(d *decoder, f *fieldDoc, q *Queue, v *yaml.Node, p string) {
	var name string
	d.str(v, p, &name)
	if slices.Contains(f.Enum, name) {
		q.Preset = Preset(name)
	} else if v.Kind == yaml.ScalarNode {
		d.add(at(v, p), "unknown preset %q (expected %s)", name, orList(f.Enum))
	}
}

// presetOptions decodes a queue's preset_options, whose keys are those of
// its preset: spring's names, goqueue's queue arguments.
func (d *decoder) presetOptions(n *yaml.Node, path string, preset Preset) PresetOptions {
	var o PresetOptions
	switch preset {
	case PresetSpring:
		springOptionsObject.decode(d, n, path, &o, nil)
	case PresetGoQueue:
		goqueueOptionsObject.decode(d, n, path, &o, nil)
	default:
		if n.Kind == yaml.MappingNode && len(n.Content) == 0 {
			return o
		}
		d.add(at(n, path), "preset_options needs preset goqueue or spring: the %s has no options", presetName(preset))
	}
	return o
}

// orList lists items as English does: "a, b or c".
func orList(items []string) string {
	if len(items) < 2 {
		return strings.Join(items, "")
	}
	return strings.Join(items[:len(items)-1], ", ") + " or " + items[len(items)-1]
}

func presetName(p Preset) string {
	if p == PresetNone {
		return "queue without a preset"
	}
	return string(p) + " preset"
}

// retryDecoding is a retry policy being read: the kinds given, and what
// the checks of an exponential policy need.
type retryDecoding struct {
	r        RetryPolicy
	kinds    []string
	hasMax   bool
	factorAt pos
}

// kind records that the policy is of kind k.
func (x *retryDecoding) kind(k string) {
	x.kinds = append(x.kinds, k)
	x.r.Kind = k
}

// retryPolicy decodes an inline policy: exactly one of delays, fixed,
// linear or exponential.
func (d *decoder) retryPolicy(n *yaml.Node, path string) RetryPolicy {
	var x retryDecoding
	ok := retryPolicyObject.decode(d, n, path, &x, nil)
	if ok && len(x.kinds) == 0 {
		d.add(at(n, path), "a retry policy needs one of: delays, fixed, linear, exponential (use \"delays: []\" for no retries)")
	}
	if len(x.kinds) > 1 {
		d.add(at(n, path), "a retry policy takes one of delays, fixed, linear or exponential, not %s", strings.Join(x.kinds, " and "))
	}
	return x.r
}

// delayList decodes an explicit list of delays, at most MaxRetries.
func (d *decoder) delayList(v *yaml.Node, p string) []time.Duration {
	delays := []time.Duration{}
	d.list(v, p, func(_ int, e *yaml.Node, ep string) {
		var dur time.Duration
		d.duration(e, ep, &dur)
		delays = append(delays, dur)
	})
	if len(delays) > MaxRetries {
		d.add(at(v, p), "at most %d delays", MaxRetries)
	}
	return delays
}

// linear decodes a linear policy and checks that its last delay is one
// RabbitMQ takes.
func (d *decoder) linear(x *retryDecoding, v *yaml.Node, p string) {
	x.kind("linear")
	linearObject.decodeRequired(d, v, p, x)
	r := &x.r
	if r.Step > 0 && r.Attempts > 0 && r.Step*time.Duration(r.Attempts) > MaxTTL {
		d.add(at(v, p), "the last delay (%d × %s) exceeds RabbitMQ's maximum TTL of 10 years", r.Attempts, r.Step)
	}
}

// exponential decodes an exponential policy's fields and checks that its
// factor and cap make delays that grow.
func (d *decoder) exponential(v *yaml.Node, p string, x *retryDecoding) {
	exponentialObject.decodeRequired(d, v, p, x)
	r := &x.r
	switch {
	case x.factorAt.line == 0:
	case r.Factor <= 1 && x.hasMax:
		d.add(x.factorAt, "factor %g must be greater than 1 when a max caps the delays", r.Factor)
	case r.Factor < 1:
		d.add(x.factorAt, "factor %g must be at least 1: delays may not shrink", r.Factor)
	}
	if x.hasMax && r.Max > 0 && r.Initial > r.Max {
		d.add(at(v, p), "initial delay %s is larger than max %s", r.Initial, r.Max)
	}
}

// decodeFactor reads an exponential policy's factor. Only a factor that
// decoded is checked further: a non-number is one problem, not also
// "factor 0".
func decodeFactor(d *decoder, _ *fieldDoc, x *retryDecoding, v *yaml.Node, p string) {
	before := len(d.errs)
	d.number(v, p, &x.r.Factor)
	if len(d.errs) == before {
		x.factorAt = at(v, p)
	}
}

func decodeAttempts(d *decoder, _ *fieldDoc, x *retryDecoding, v *yaml.Node, p string) {
	d.intField(v, p, *attemptsDoc.Min, *attemptsDoc.Max, &x.r.Attempts)
}

func decodeJitter(d *decoder, _ *fieldDoc, x *retryDecoding, v *yaml.Node, p string) {
	x.r.Jitter = d.jitter(v, p)
}

// decodeRequired is decode plus a check that the required keys are
// present.
func (o *object[T]) decodeRequired(d *decoder, n *yaml.Node, path string, t *T) {
	var seen []string
	if !o.decode(d, n, path, t, func(k string, _ *yaml.Node, _ string) { seen = append(seen, k) }) {
		return
	}
	for _, k := range o.required() {
		if !slices.Contains(seen, k) {
			d.add(at(n, path), "missing %q", k)
		}
	}
}

func (d *decoder) policy(n *yaml.Node, path string) Policy {
	pol := Policy{ApplyTo: "queues", at: at(n, path)}
	ok := policyObject.decode(d, n, path, &pol, nil)
	if ok && (pol.Name == "" || pol.Pattern == "" || len(pol.Definition) == 0) {
		d.add(pol.at, "a policy needs a name, a pattern and a non-empty definition")
	}
	return pol
}

func decodeApplyTo(d *decoder, f *fieldDoc, pol *Policy, v *yaml.Node, p string) {
	d.str(v, p, &pol.ApplyTo)
	if !slices.Contains(f.Enum, pol.ApplyTo) {
		d.add(at(v, p), "unknown apply_to %q (expected queues, exchanges or all)", pol.ApplyTo)
	}
}

func (d *decoder) resolveRetryRefs(s *Spec) {
	for i := range s.Queues {
		q := &s.Queues[i]
		if q.RetryRef == "" {
			continue
		}
		found := false
		for _, np := range s.RetryPolicies {
			if np.Name == q.RetryRef {
				q.Retry, found = np.Policy, true
			}
		}
		if !found {
			names := make([]string, len(s.RetryPolicies))
			for j, np := range s.RetryPolicies {
				names[j] = np.Name
			}
			hint := "retry_policies is empty"
			if len(names) > 0 {
				hint = "known: " + strings.Join(names, ", ")
			}
			d.add(q.retryAt, "unknown retry policy %q (%s)", q.RetryRef, hint)
		}
	}
}
