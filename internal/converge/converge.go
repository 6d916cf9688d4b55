// Package converge reads the convergence corpus, plan/testdata/converge:
// cases in the style of sqldef's, each a current spec, a desired spec and
// the plan from one to the other, as data. Two tests run every case: the
// plan package's offline, through the diff and an in-memory broker, and
// cmd/rmqtopo's online, through plan → apply → plan on a real node. Both
// must print the case's plan, and planning again after the apply must find
// nothing to do.
//
// A case is a txtar archive: its comment says what the case shows, and
// its files are
//
//	flags               optional: plan and apply flags, of --prune,
//	                    --migrate and --allow-destroy
//	current/spec.yaml   applied first, to an empty vhost
//	desired/spec.yaml   then planned and applied
//	plan.txt            the plan's text (go test ./plan -update rewrites it)
//	plan-4.0.txt        optional: the plan's text on a broker of 4.0 or
//	                    later, where it differs: such a broker declares a
//	                    quorum queue with rmqtopo's default delivery limit
//	                    without the argument (its own default is 20), so
//	                    the current spec leaves another queue behind
//
// Both specs live at the same base name, so they are one spec (one
// ownership record) at two points in time. Their vhost is "@VHOST@",
// which the online test replaces with a vhost of its own, and replaces
// back in what it prints.
package converge

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/rogpeppe/go-internal/txtar"

	"github.com/rmqtopo/rmqtopo/rabbitmq"
	"github.com/rmqtopo/rmqtopo/topology"
)

// Vhost stands for the vhost of a case in its files.
const Vhost = "@VHOST@"

// RabbitMQ is the version every case's plan is judged for
// (--rabbitmq-version), so that its checks, and so its plan, do not depend
// on the version of the broker the online test runs on.
const RabbitMQ = "3.13.7"

// Files of a case.
const (
	FileFlags   = "flags"
	FileCurrent = "current/spec.yaml"
	FileDesired = "desired/spec.yaml"
	FilePlan    = "plan.txt"
	FilePlan40  = "plan-4.0.txt"
)

// Flags are the choices a case plans and applies its desired spec with.
type Flags struct {
	Prune, Migrate, AllowDestroy bool
}

// Args are the flags as the CLI takes them.
func (f Flags) Args() []string {
	var out []string
	for _, a := range []struct {
		on   bool
		name string
	}{{f.Prune, "--prune"}, {f.Migrate, "--migrate"}, {f.AllowDestroy, "--allow-destroy"}} {
		if a.on {
			out = append(out, a.name)
		}
	}
	return out
}

// Case is one case of the corpus.
type Case struct {
	// Name is the file's base name without ".txtar".
	Name    string
	Path    string
	Flags   Flags
	Current []byte
	Desired []byte
	// Plan is the expected plan text, with the vhost as Vhost.
	Plan string
	// Plan40 is the expected plan text on a broker that gives a quorum
	// queue a delivery limit by default (4.0+); "" where it is Plan.
	Plan40  string
	archive *txtar.Archive
}

// Load reads every case of dir, in name order.
func Load(dir string) ([]Case, error) {
	paths, err := filepath.Glob(filepath.Join(dir, "*.txtar"))
	if err != nil {
		return nil, err
	}
	if len(paths) == 0 {
		return nil, fmt.Errorf("converge: no cases in %s", dir)
	}
	slices.Sort(paths)
	var out []Case
	for _, p := range paths {
		c, err := read(p)
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, nil
}

func read(path string) (Case, error) {
	a, err := txtar.ParseFile(path)
	if err != nil {
		return Case{}, err
	}
	c := Case{Name: strings.TrimSuffix(filepath.Base(path), ".txtar"), Path: path, archive: a}
	for _, f := range a.Files {
		switch f.Name {
		case FileFlags:
			if c.Flags, err = parseFlags(string(f.Data)); err != nil {
				return Case{}, fmt.Errorf("%s: %w", path, err)
			}
		case FileCurrent:
			c.Current = f.Data
		case FileDesired:
			c.Desired = f.Data
		case FilePlan:
			c.Plan = string(f.Data)
		case FilePlan40:
			c.Plan40 = string(f.Data)
		default:
			return Case{}, fmt.Errorf("%s: unknown file %q", path, f.Name)
		}
	}
	if c.Current == nil || c.Desired == nil {
		return Case{}, fmt.Errorf("%s: want both %s and %s", path, FileCurrent, FileDesired)
	}
	return c, nil
}

func parseFlags(s string) (Flags, error) {
	var f Flags
	for _, a := range strings.Fields(s) {
		switch a {
		case "--prune":
			f.Prune = true
		case "--migrate":
			f.Migrate = true
		case "--allow-destroy":
			f.AllowDestroy = true
		default:
			return Flags{}, fmt.Errorf("flag %q: want --prune, --migrate or --allow-destroy", a)
		}
	}
	return f, nil
}

// PlanOn is the expected plan text on a broker of version v.
func (c Case) PlanOn(v topology.Version) string {
	if c.Plan40 != "" && rabbitmq.ProfileFor(v).DefaultDeliveryLimit() > 0 {
		return c.Plan40
	}
	return c.Plan
}

// In returns a case's spec with its vhost set to vhost.
func In(spec []byte, vhost string) []byte {
	return bytes.ReplaceAll(spec, []byte(Vhost), []byte(vhost))
}

// Out returns what a case printed for vhost with the vhost as Vhost again.
func Out(printed, vhost string) string {
	return strings.ReplaceAll(printed, vhost, Vhost)
}

// WritePlan rewrites the case's file with plan as its expected plan.
func (c Case) WritePlan(plan string) error {
	a := &txtar.Archive{Comment: c.archive.Comment}
	for _, f := range c.archive.Files {
		if f.Name != FilePlan {
			a.Files = append(a.Files, f)
		}
	}
	a.Files = append(a.Files, txtar.File{Name: FilePlan, Data: []byte(plan)})
	return os.WriteFile(c.Path, txtar.Format(a), 0o644)
}
