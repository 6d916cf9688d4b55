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
	K8sCluster   string            `name:"k8s-cluster" help:"With --format k8s: the RabbitmqCluster to declare in (rabbitmqClusterReference.name)." default:"rabbitmq"`
	K8sNamespace string            `name:"k8s-namespace" placeholder:"NS" help:"With --format k8s: the namespace of every object (default: none, for kubectl -n)."`
	Version      layoutVersionFlag `embed:""`
}

func (c *renderCmd) Run(e *env) error {
	files, err := loadSpecs(e, c.Files)
	if err != nil {
		return err
	}
	expand, err := c.Version.expander(files)
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

// layoutVersionFlag is the RabbitMQ version render lays queues out for.
type layoutVersionFlag struct {
	// Render reads no broker: the version is the user's word alone.
	RabbitMQVersion string `name:"rabbitmq-version" placeholder:"X.Y[.Z]" help:"The RabbitMQ version to render for (render reads no broker): layout auto is native from 4.3.1, else shared with a return queue."`
}

// expander resolves files for the version, with nothing live, as a plan
// against an empty broker of that version would, and returns how to
// expand them.
func (f layoutVersionFlag) expander(files []*spec.File) (func() topology.Topology, error) {
	j, err := plan.JudgeVersion(f.RabbitMQVersion, nil, "")
	if err != nil {
		return nil, err
	}
	v, _ := topology.ParseVersion(j.Version)
	spec.Resolve(files, spec.Target{RabbitMQ: v})
	return func() topology.Topology { return spec.Expand(files...) }, nil
}
