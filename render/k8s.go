package render

import (
	"errors"
	"fmt"
	"io"
	"maps"
	"regexp"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/rmqtopo/rmqtopo/topology"
)

// K8sOptions say which RabbitMQ cluster the rendered objects belong to.
type K8sOptions struct {
	// Cluster is the name of the RabbitmqCluster object the operator
	// declares everything in (rabbitmqClusterReference.name).
	Cluster string
	// Namespace, when set, is the namespace of every rendered object; the
	// cluster is looked up there too. Empty leaves it to kubectl -n.
	Namespace string
}

// k8sAPIVersion is the Messaging Topology Operator's API group and version.
const k8sAPIVersion = "rabbitmq.com/v1beta1"

// k8sApplyTo is what the operator's Policy CRD accepts as applyTo.
var k8sApplyTo = map[string]bool{
	"queues": true, "classic_queues": true, "quorum_queues": true,
	"streams": true, "exchanges": true, "all": true,
}

type k8sObject struct {
	APIVersion string      `yaml:"apiVersion"`
	Kind       string      `yaml:"kind"`
	Metadata   k8sMetadata `yaml:"metadata"`
	Spec       any         `yaml:"spec"`
}

type k8sMetadata struct {
	Name      string `yaml:"name"`
	Namespace string `yaml:"namespace,omitempty"`
}

type k8sClusterRef struct {
	Name string `yaml:"name"`
}

type k8sExchangeSpec struct {
	Name       string         `yaml:"name"`
	Vhost      string         `yaml:"vhost"`
	Type       string         `yaml:"type"`
	Durable    bool           `yaml:"durable"`
	AutoDelete bool           `yaml:"autoDelete"`
	Arguments  map[string]any `yaml:"arguments,omitempty"`
	Cluster    k8sClusterRef  `yaml:"rabbitmqClusterReference"`
}

type k8sQueueSpec struct {
	Name       string `yaml:"name"`
	Vhost      string `yaml:"vhost"`
	Type       string `yaml:"type,omitempty"`
	Durable    bool   `yaml:"durable"`
	AutoDelete bool   `yaml:"autoDelete"`
	// DeleteIfEmpty is rmqtopo's guarded delete: deleting the Queue object
	// must not drop the messages in it.
	DeleteIfEmpty bool           `yaml:"deleteIfEmpty"`
	Arguments     map[string]any `yaml:"arguments,omitempty"`
	Cluster       k8sClusterRef  `yaml:"rabbitmqClusterReference"`
}

type k8sBindingSpec struct {
	Source          string         `yaml:"source"`
	Destination     string         `yaml:"destination"`
	DestinationType string         `yaml:"destinationType"`
	RoutingKey      string         `yaml:"routingKey"`
	Arguments       map[string]any `yaml:"arguments,omitempty"`
	Vhost           string         `yaml:"vhost"`
	Cluster         k8sClusterRef  `yaml:"rabbitmqClusterReference"`
}

type k8sPolicySpec struct {
	Name       string         `yaml:"name"`
	Vhost      string         `yaml:"vhost"`
	Pattern    string         `yaml:"pattern"`
	ApplyTo    string         `yaml:"applyTo"`
	Priority   int64          `yaml:"priority"`
	Definition map[string]any `yaml:"definition"`
	Cluster    k8sClusterRef  `yaml:"rabbitmqClusterReference"`
}

const k8sHeader = `# RabbitMQ Messaging Topology Operator resources (rabbitmq.com/v1beta1),
# rendered by rmqtopo. Apply with kubectl apply -f; every vhost must exist.
`

// Kubernetes writes t as one YAML stream of the Messaging Topology
// Operator's Exchange, Queue, Binding and Policy objects. It refuses, before
// writing anything, what the operator cannot declare: internal exchanges and
// policies with an applyTo its CRD does not accept.
func Kubernetes(w io.Writer, t topology.Topology, opts K8sOptions) error {
	if opts.Cluster == "" {
		return errors.New("render k8s: no RabbitmqCluster name")
	}
	objs, err := k8sObjects(t, opts)
	if err != nil {
		return err
	}
	if _, err := io.WriteString(w, k8sHeader); err != nil {
		return err
	}
	enc := yaml.NewEncoder(w)
	enc.SetIndent(2)
	for _, o := range objs {
		if err := enc.Encode(o); err != nil {
			return fmt.Errorf("render k8s: %w", err)
		}
	}
	return enc.Close()
}

func k8sObjects(t topology.Topology, opts K8sOptions) ([]k8sObject, error) {
	ref := k8sClusterRef{Name: opts.Cluster}
	obj := func(kind, name string, spec any) k8sObject {
		return k8sObject{APIVersion: k8sAPIVersion, Kind: kind,
			Metadata: k8sMetadata{Name: name, Namespace: opts.Namespace}, Spec: spec}
	}
	var objs []k8sObject
	var errs []error
	names := newNameSet("k8s", "exchanges")
	for _, e := range t.Exchanges {
		if e.Internal {
			errs = append(errs, fmt.Errorf("render k8s: exchange %s is internal, which the operator's Exchange cannot declare", describe(e.Vhost, e.Name)))
			continue
		}
		name := k8sObjectName(e.Vhost, e.Name)
		errs = append(errs, names.claim(name, describe(e.Vhost, e.Name)))
		objs = append(objs, obj("Exchange", name, k8sExchangeSpec{
			Name: e.Name, Vhost: e.Vhost, Type: e.Type, Durable: e.Durable, AutoDelete: e.AutoDelete,
			Arguments: e.Arguments, Cluster: ref}))
	}
	names = newNameSet("k8s", "queues")
	for _, q := range t.Queues {
		name := k8sObjectName(q.Vhost, q.Name)
		errs = append(errs, names.claim(name, describe(q.Vhost, q.Name)))
		spec := k8sQueueSpec{Name: q.Name, Vhost: q.Vhost, Durable: q.Durable, AutoDelete: q.AutoDelete,
			DeleteIfEmpty: true, Arguments: q.Arguments, Cluster: ref}
		// The operator declares spec.type as x-queue-type itself, and a
		// reader looks for the type there, not among the arguments.
		if typ, ok := q.Arguments["x-queue-type"].(string); ok {
			spec.Type = typ
			spec.Arguments = maps.Clone(q.Arguments)
			delete(spec.Arguments, "x-queue-type")
		}
		objs = append(objs, obj("Queue", name, spec))
	}
	names = newNameSet("k8s", "bindings")
	for _, b := range t.Bindings {
		name := k8sName(b.Source+"."+b.Destination, false, bindingIdentity(b)...)
		errs = append(errs, names.claim(name, b.Addr().String()))
		objs = append(objs, obj("Binding", name, k8sBindingSpec{
			Source: b.Source, Destination: b.Destination, DestinationType: b.DestinationType,
			RoutingKey: b.RoutingKey, Arguments: b.Arguments, Vhost: b.Vhost, Cluster: ref}))
	}
	names = newNameSet("k8s", "policies")
	for _, p := range t.Policies {
		if !k8sApplyTo[p.ApplyTo] {
			errs = append(errs, fmt.Errorf("render k8s: policy %s applies to %q, which the operator's Policy does not accept", describe(p.Vhost, p.Name), p.ApplyTo))
			continue
		}
		name := k8sObjectName(p.Vhost, p.Name)
		errs = append(errs, names.claim(name, describe(p.Vhost, p.Name)))
		def := map[string]any{}
		maps.Copy(def, p.Definition)
		objs = append(objs, obj("Policy", name, k8sPolicySpec{
			Name: p.Name, Vhost: p.Vhost, Pattern: p.Pattern, ApplyTo: p.ApplyTo, Priority: p.Priority,
			Definition: def, Cluster: ref}))
	}
	return objs, errors.Join(errs...)
}

// dns1123Subdomain is what Kubernetes accepts as an object's name (with at
// most 253 characters).
var dns1123Subdomain = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`)

var notK8sNameChars = regexp.MustCompile(`[^a-z0-9]+`)

// k8sObjectName names an exchange, queue or policy. A name in vhost "/"
// that is already valid is kept; a name in another vhost is prefixed with
// the vhost, so the same queue name in two vhosts gives two objects.
func k8sObjectName(vhost, name string) string {
	if vhost == "/" {
		return k8sName(name, true, vhost, name)
	}
	return k8sName(vhost+"."+name, false, vhost, name)
}

// k8sName returns base when verbatim and base is a valid name; otherwise base
// lowercased, with every run of other characters made a "-" in each
// dot-separated part, cut to fit, and a hash of identity appended.
func k8sName(base string, verbatim bool, identity ...string) string {
	if verbatim && len(base) <= 253 && dns1123Subdomain.MatchString(base) {
		return base
	}
	hash := identityHash(identity...)
	var parts []string
	for _, p := range strings.Split(strings.ToLower(base), ".") {
		if p = strings.Trim(notK8sNameChars.ReplaceAllString(p, "-"), "-"); p != "" {
			parts = append(parts, p)
		}
	}
	s := strings.Join(parts, ".")
	if limit := 253 - len("-") - len(hash); len(s) > limit {
		s = strings.TrimRight(s[:limit], ".-")
	}
	if s == "" {
		return hash
	}
	return s + "-" + hash
}
