package render

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/rmqtopo/rmqtopo/topology"
)

const terraformHeader = `# RabbitMQ resources for the cyrilgdn/rabbitmq Terraform provider, rendered
# by rmqtopo. Every vhost must exist.
`

// Terraform writes t as HCL for the cyrilgdn/rabbitmq provider:
// rabbitmq_exchange, rabbitmq_queue, rabbitmq_binding and rabbitmq_policy
// resources, laid out exactly as `terraform fmt` lays them out, so the file
// can be committed as it is. Bindings refer to the exchanges and queues they
// join, so Terraform creates those first.
//
// It refuses, before writing anything, what the provider would declare
// differently from the spec: internal exchanges (it has no such attribute),
// exchange arguments that are not strings, and policy values other than
// strings and integers (it sends policy values as strings and turns only
// integer-looking ones back into numbers).
func Terraform(w io.Writer, t topology.Topology) error {
	tf, err := newTerraform(t)
	if err != nil {
		return err
	}
	var resources []hclItem
	var errs []error
	for _, e := range t.Exchanges {
		r, err := tf.exchange(e)
		resources, errs = append(resources, r), append(errs, err)
	}
	for _, q := range t.Queues {
		resources = append(resources, tf.queue(q))
	}
	for _, b := range t.Bindings {
		resources = append(resources, tf.binding(b))
	}
	for _, p := range t.Policies {
		r, err := tf.policy(p)
		resources, errs = append(resources, r), append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	var b strings.Builder
	b.WriteString(terraformHeader)
	for _, r := range resources {
		b.WriteByte('\n')
		writeHCL(&b, []hclItem{r}, 0)
	}
	_, err = io.WriteString(w, b.String())
	return err
}

// terraform holds the resource labels of one rendering, so that bindings
// can refer to the exchanges and queues they join.
type terraform struct {
	exchanges map[[2]string]string // {vhost, name} → label
	queues    map[[2]string]string
	policies  map[[2]string]string
}

func newTerraform(t topology.Topology) (*terraform, error) {
	tf := &terraform{exchanges: map[[2]string]string{}, queues: map[[2]string]string{}, policies: map[[2]string]string{}}
	var errs []error
	label := func(m map[[2]string]string, vhost, name string, names *nameSet) {
		l := terraformLabel(vhost, name)
		errs = append(errs, names.claim(l, describe(vhost, name)))
		m[[2]string{vhost, name}] = l
	}
	names := newNameSet("terraform", "exchanges")
	for _, e := range t.Exchanges {
		label(tf.exchanges, e.Vhost, e.Name, names)
	}
	names = newNameSet("terraform", "queues")
	for _, q := range t.Queues {
		label(tf.queues, q.Vhost, q.Name, names)
	}
	names = newNameSet("terraform", "policies")
	for _, p := range t.Policies {
		label(tf.policies, p.Vhost, p.Name, names)
	}
	names = newNameSet("terraform", "bindings")
	for _, b := range t.Bindings {
		errs = append(errs, names.claim(terraformBindingLabel(b), b.Addr().String()))
	}
	return tf, errors.Join(errs...)
}

func resource(typ, label string, body ...hclItem) hclItem {
	return hclItem{block: fmt.Sprintf("resource %s %s", hclString(typ), hclString(label)), items: body}
}

func attr(key string, v any) hclItem { return hclValue(key, v) }

var blank = hclItem{blank: true}

func (tf *terraform) exchange(e topology.Exchange) (hclItem, error) {
	var errs []error
	if e.Internal {
		errs = append(errs, fmt.Errorf("render terraform: exchange %s is internal, which rabbitmq_exchange cannot declare", describe(e.Vhost, e.Name)))
	}
	settings := []hclItem{attr("type", e.Type), attr("durable", e.Durable), attr("auto_delete", e.AutoDelete)}
	if len(e.Arguments) > 0 {
		for _, k := range slices.Sorted(maps.Keys(e.Arguments)) {
			if _, ok := e.Arguments[k].(string); !ok {
				errs = append(errs, fmt.Errorf("render terraform: exchange %s: argument %q is %s, but rabbitmq_exchange sends only strings", describe(e.Vhost, e.Name), k, jsonText(e.Arguments[k])))
			}
		}
		settings = append(settings, attr("arguments", map[string]any(e.Arguments)))
	}
	return resource("rabbitmq_exchange", tf.exchanges[[2]string{e.Vhost, e.Name}],
		attr("name", e.Name), attr("vhost", e.Vhost), blank,
		hclItem{block: "settings", items: settings}), errors.Join(errs...)
}

func (tf *terraform) queue(q topology.Queue) hclItem {
	settings := []hclItem{attr("durable", q.Durable), attr("auto_delete", q.AutoDelete)}
	if len(q.Arguments) > 0 {
		settings = append(settings, jsonencode("arguments_json", q.Arguments))
	}
	return resource("rabbitmq_queue", tf.queues[[2]string{q.Vhost, q.Name}],
		attr("name", q.Name), attr("vhost", q.Vhost), blank,
		hclItem{block: "settings", items: settings})
}

func (tf *terraform) binding(b topology.Binding) hclItem {
	ref := func(typ, name string) hclItem {
		kind, m := "rabbitmq_exchange", tf.exchanges
		if typ == topology.DestQueue {
			kind, m = "rabbitmq_queue", tf.queues
		}
		if l, ok := m[[2]string{b.Vhost, name}]; ok {
			return hclItem{expr: kind + "." + l + ".name"}
		}
		// Not in the topology (amq.*, or declared elsewhere): by name.
		return hclItem{expr: hclString(name)}
	}
	source, dest := ref(topology.DestExchange, b.Source), ref(b.DestinationType, b.Destination)
	source.key, dest.key = "source", "destination"
	body := []hclItem{source, attr("vhost", b.Vhost), dest,
		attr("destination_type", b.DestinationType), attr("routing_key", b.RoutingKey)}
	if len(b.Arguments) > 0 {
		body = append(body, jsonencode("arguments_json", b.Arguments))
	}
	return resource("rabbitmq_binding", terraformBindingLabel(b), body...)
}

func (tf *terraform) policy(p topology.Policy) (hclItem, error) {
	var errs []error
	for _, k := range slices.Sorted(maps.Keys(p.Definition)) {
		v := p.Definition[k]
		s, isString := v.(string)
		_, isInt := v.(int64)
		if _, err := strconv.ParseInt(s, 10, 64); (isString && err == nil) || (!isString && !isInt) {
			errs = append(errs, fmt.Errorf("render terraform: policy %s: %q is %s, but rabbitmq_policy sends definition values as strings and turns only integer-looking ones into numbers", describe(p.Vhost, p.Name), k, jsonText(v)))
		}
	}
	def := map[string]any(p.Definition)
	if def == nil {
		def = map[string]any{}
	}
	return resource("rabbitmq_policy", tf.policies[[2]string{p.Vhost, p.Name}],
		attr("name", p.Name), attr("vhost", p.Vhost), blank,
		hclItem{block: "policy", items: []hclItem{
			attr("pattern", p.Pattern), attr("priority", p.Priority), attr("apply_to", p.ApplyTo), blank,
			attr("definition", def)}}), errors.Join(errs...)
}

// jsonText shows a value in an error as the broker would: as JSON.
func jsonText(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

// jsonencode is `key = jsonencode({...})`: the provider's *_json
// attributes keep argument types (numbers, booleans, tables) that its
// string maps would lose.
func jsonencode(key string, args topology.Args) hclItem {
	item := hclValue(key, map[string]any(args))
	item.open, item.close = "jsonencode({", "})"
	return item
}

// A Terraform label is the name with dots made underscores, when the name
// (in vhost "/") has only letters, digits, dashes and single inner dots:
// that mapping cannot make two names alike and never yields "__". Any other
// name is cleaned up and given "__" and a hash of its identity.
var (
	plainTerraformName = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9-]*(\.[A-Za-z0-9-]+)*$`)
	notTerraformChars  = regexp.MustCompile(`[^A-Za-z0-9-]+`)
)

func terraformLabel(vhost, name string) string {
	if vhost == "/" && plainTerraformName.MatchString(name) {
		return strings.ReplaceAll(name, ".", "_")
	}
	base := name
	if vhost != "/" {
		base = vhost + "." + name
	}
	return mangledTerraformLabel(base, vhost, name)
}

func terraformBindingLabel(b topology.Binding) string {
	return mangledTerraformLabel(b.Source+" to "+b.Destination, bindingIdentity(b)...)
}

func mangledTerraformLabel(base string, identity ...string) string {
	s := strings.Trim(notTerraformChars.ReplaceAllString(base, "_"), "_")
	if s == "" || !(s[0] >= 'A' && s[0] <= 'Z' || s[0] >= 'a' && s[0] <= 'z') {
		s = "_" + s
	}
	return strings.TrimSuffix(s, "_") + "__" + identityHash(identity...)
}
