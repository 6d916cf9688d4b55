package main

import (
	"fmt"

	"github.com/rmqtopo/rmqtopo/plan"
	"github.com/rmqtopo/rmqtopo/render"
	"github.com/rmqtopo/rmqtopo/spec"
	"github.com/rmqtopo/rmqtopo/topology"
)

type renderCmd struct {
	Files  []string `arg:"" name:"FILE" help:"Spec files (one vhost each)."`
	Format string   `short:"f" help:"Output format: definitions (RabbitMQ definitions JSON), mermaid, dot, schedule, k8s (Messaging Topology Operator objects) or terraform (cyrilgdn/rabbitmq provider HCL)." enum:"definitions,mermaid,dot,schedule,k8s,terraform" default:"schedule"`
	// The RabbitmqCluster the k8s objects belong to, and their namespace.
	K8sCluster   string      `name:"k8s-cluster" help:"With --format k8s: the RabbitmqCluster to declare in (rabbitmqClusterReference.name)." default:"rabbitmq"`
	K8sNamespace string      `name:"k8s-namespace" placeholder:"NS" help:"With --format k8s: the namespace of every object (default: none, for kubectl -n)."`
	Native       nativeFlags `embed:""`
}

func (c *renderCmd) Run(e *env) error {
	files, err := loadSpecs(e, c.Files)
	if err != nil {
		return err
	}
	expand, err := c.Native.expander(e, files)
	if err != nil {
		return err
	}
	switch c.Format {
	case "schedule":
		return render.Schedule(e.stdout, files, e.color)
	case "definitions":
		return render.Definitions(e.stdout, expand())
	case "mermaid":
		return render.Mermaid(e.stdout, expand())
	case "dot":
		return render.Dot(e.stdout, expand())
	case "k8s":
		return render.Kubernetes(e.stdout, expand(), render.K8sOptions{Cluster: c.K8sCluster, Namespace: c.K8sNamespace})
	case "terraform":
		return render.Terraform(e.stdout, expand())
	}
	return fmt.Errorf("unknown format %q", c.Format)
}

// nativeFlags choose RabbitMQ 4.3's native delayed retry in renderings.
type nativeFlags struct {
	NativeDelayedRetry bool `name:"native-delayed-retry" help:"Render linear schedules of quorum queues as RabbitMQ 4.3 x-delayed-retry-* arguments instead of wait queues; needs --rabbitmq-version 4.3 or later."`
	// Render reads no broker: the version is the user's word alone.
	RabbitMQVersion string `name:"rabbitmq-version" placeholder:"X.Y[.Z]" help:"The RabbitMQ version to render for (render reads no broker); --native-delayed-retry needs 4.3 or later."`
}

// expander returns how to expand files for rendering: as always, or with
// native delayed retry, which it reports on stderr queue by queue.
func (f nativeFlags) expander(e *env, files []*spec.File) (func() topology.Topology, error) {
	plain := func() topology.Topology { return spec.Expand(files...) }
	if !f.NativeDelayedRetry {
		return plain, nil
	}
	j, err := plan.JudgeVersion(f.RabbitMQVersion, nil, "")
	if err != nil {
		return nil, err
	}
	v, _ := topology.ParseVersion(j.Version)
	if arg, _ := topology.LookupFeature(topology.FeatureQueueArgument, "x-delayed-retry-type", nil); !v.Known() || arg.At(v) != topology.Accepted {
		return nil, fmt.Errorf("--native-delayed-retry needs --rabbitmq-version %s or later (got %s): older brokers ignore x-delayed-retry-*", arg.Since, v)
	}
	return func() topology.Topology {
		t, converted := spec.NativeDelayedRetry(files, spec.Expand(files...))
		for _, q := range converted {
			fmt.Fprintf(e.stderr, "queue %q: native delayed retry (x-delayed-retry-*), no wait queues; its service must reject failed deliveries instead of republishing\n", q)
		}
		return t
	}, nil
}
