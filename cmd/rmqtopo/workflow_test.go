package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/alecthomas/kong"
	"github.com/google/go-cmp/cmp"
	"go.yaml.in/yaml/v3"
)

// The GitHub Actions example is a file people copy into their repositories,
// so it is tested like code: it must be valid YAML of the right shape, keep
// credentials out of the pull-request job, and every rmqtopo command in it
// must be one this CLI accepts. The pull-request job's commands run here,
// offline, on the example's spec and export, and the plan comment they
// produce is the golden file examples/github-actions/plan-comment.md.

const workflowDir = "../../examples/github-actions"

func init() {
	if flag.Lookup("update") == nil {
		flag.Bool("update", false, "rewrite golden files")
	}
}

type workflow struct {
	Name string
	On   map[string]any
	Env  map[string]string
	Jobs map[string]wfJob
}

type wfJob struct {
	If          string
	RunsOn      string `yaml:"runs-on"`
	Permissions map[string]string
	Environment string
	Concurrency string
	Env         map[string]string
	Steps       []wfStep
}

type wfStep struct {
	Name string
	ID   string
	If   string
	Uses string
	Run  string
	With map[string]string
	Env  map[string]string
}

// scripts returns every step's shell script, in order.
func (j wfJob) scripts() []string {
	var out []string
	for _, s := range j.Steps {
		if s.Run != "" {
			out = append(out, s.Run)
		}
	}
	return out
}

func TestGitHubActionsWorkflow(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(workflowDir, "rmqtopo.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var wf workflow
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&wf); err != nil {
		t.Fatalf("rmqtopo.yml: %v", err)
	}
	if wf.On["pull_request"] == nil || wf.On["push"] == nil {
		t.Errorf("want pull_request and push triggers, got %v", wf.On)
	}
	plan, apply := wf.Jobs["plan"], wf.Jobs["apply"]
	if len(plan.Steps) == 0 || len(apply.Steps) == 0 {
		t.Fatalf("want a plan and an apply job, got %v", wf.Jobs)
	}

	// The pull-request job has no credentials; it may comment, nothing else.
	planText, _ := yaml.Marshal(plan)
	if bytes.Contains(planText, []byte("secrets.")) {
		t.Errorf("the plan job reads secrets; it must plan against the export only")
	}
	if plan.Permissions["pull-requests"] != "write" || plan.Permissions["contents"] != "read" {
		t.Errorf("plan job permissions %v", plan.Permissions)
	}
	if !strings.Contains(plan.If, "pull_request") || !strings.Contains(apply.If, "push") {
		t.Errorf("plan runs if %q, apply if %q", plan.If, apply.If)
	}

	planCmds := rmqtopoCommands(t, plan.scripts(), wf.Env)
	applyCmds := rmqtopoCommands(t, apply.scripts(), wf.Env)
	if len(planCmds) != 2 || len(applyCmds) != 2 {
		t.Fatalf("want validate and plan in the plan job, apply and plan in the apply job; got %q and %q", planCmds, applyCmds)
	}
	checkApplyJob(t, apply.Env, applyCmds)
	runPlanJob(t, planCmds, plan.Steps)
}

// rmqtopoCommands finds the rmqtopo invocations in scripts and turns each
// into its arguments as the shell would: variables expanded (from env, or
// left empty), quotes removed, globs matched in the example directory, and
// everything from the first redirection or operator on dropped.
func rmqtopoCommands(t *testing.T, scripts []string, env map[string]string) [][]string {
	t.Helper()
	var cmds [][]string
	for _, script := range scripts {
		for _, line := range strings.Split(strings.ReplaceAll(script, "\\\n", " "), "\n") {
			words := strings.Fields(line)
			if len(words) == 0 || words[0] != "rmqtopo" {
				continue
			}
			var args []string
			for _, w := range words[1:] {
				if strings.ContainsAny(w[:1], "><|;&") || strings.HasPrefix(w, "2>") {
					break
				}
				w = os.Expand(strings.Trim(w, `"'`), func(k string) string { return env[k] })
				if strings.ContainsAny(w, "*?[") {
					m, err := filepath.Glob(filepath.Join(workflowDir, w))
					if err != nil || len(m) == 0 {
						t.Fatalf("%q: the glob %s matches nothing in %s", line, w, workflowDir)
					}
					for _, p := range m {
						rel, _ := filepath.Rel(workflowDir, p)
						args = append(args, filepath.ToSlash(rel))
					}
					continue
				}
				args = append(args, w)
			}
			cmds = append(cmds, args)
		}
	}
	return cmds
}

// checkApplyJob wants the apply job's credentials to come from secrets into
// the variables rmqtopo reads, and its commands to be an apply that refuses
// destructive changes and a live plan, as this CLI parses them.
func checkApplyJob(t *testing.T, env map[string]string, cmds [][]string) {
	t.Helper()
	var help bytes.Buffer
	if err := run(context.Background(), []string{"apply", "--help"}, nil, &help, &help); err != nil {
		t.Fatal(err)
	}
	// Help wraps lines; compare with single spaces.
	helpText := strings.Join(strings.Fields(help.String()), " ")
	secret := regexp.MustCompile(`^\$\{\{ secrets\.[A-Z_]+ \}\}$`)
	for k, v := range env {
		if !secret.MatchString(v) {
			t.Errorf("apply job env %s = %q, want a secret", k, v)
		}
		if !strings.Contains(helpText, "env "+k) {
			t.Errorf("apply job sets %s, which rmqtopo apply does not read", k)
		}
	}
	want := []string{"apply <FILE>", "plan <FILE>"}
	for i, args := range cmds {
		var c cli
		parser, err := kong.New(&c, kong.Name("rmqtopo"), kong.Exit(func(int) { t.Fatalf("%q exits", args) }))
		if err != nil {
			t.Fatal(err)
		}
		kctx, err := parser.Parse(args)
		if err != nil {
			t.Errorf("rmqtopo %s: %v", strings.Join(args, " "), err)
			continue
		}
		if kctx.Command() != want[i] {
			t.Errorf("apply job command %d is %q, want %q", i, kctx.Command(), want[i])
		}
		if c.Apply.AllowDestroy || c.Plan.AllowDestroy || c.Plan.Against != "" {
			t.Errorf("rmqtopo %s: the apply job must plan live and refuse destructive changes", strings.Join(args, " "))
		}
	}
	if len(cmds) > 0 && !slices.Contains(cmds[0], "--auto-approve") {
		t.Errorf("apply runs without a terminal, so it needs --auto-approve: %q", cmds[0])
	}
}

// runPlanJob runs the pull-request job's commands in the example directory
// and compares the plan it would post with the golden comment.
func runPlanJob(t *testing.T, cmds [][]string, steps []wfStep) {
	t.Helper()
	comment := ""
	for _, s := range steps {
		if strings.Contains(s.Uses, "comment") {
			comment = s.With["path"]
		}
	}
	if comment == "" || !strings.Contains(strings.Join(wfJob{Steps: steps}.scripts(), "\n"), "> "+comment) {
		t.Fatalf("no step comments the file the plan is written to (%q)", comment)
	}
	t.Chdir(workflowDir)
	var out, errb bytes.Buffer
	if err := run(context.Background(), cmds[0], nil, &out, &errb); err != nil || cmds[0][0] != "validate" {
		t.Fatalf("rmqtopo %s: %v\n%s", strings.Join(cmds[0], " "), err, errb.String())
	}
	out.Reset()
	err := run(context.Background(), cmds[1], nil, &out, &errb)
	var ee *ExitError
	if !errors.As(err, &ee) || ee.Code != 2 {
		t.Fatalf("rmqtopo %s: %v, want exit status 2 (changes)\n%s", strings.Join(cmds[1], " "), err, errb.String())
	}
	if !slices.Contains(cmds[1], "--against") || !slices.Contains(cmds[1], "markdown") {
		t.Errorf("the pull-request plan must be --against an export, as markdown: %q", cmds[1])
	}
	const golden = "plan-comment.md"
	if f := flag.Lookup("update"); f != nil && f.Value.String() == "true" {
		if err := os.WriteFile(golden, out.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (go test ./cmd/rmqtopo -run TestGitHubActionsWorkflow -update writes it)", err)
	}
	if diff := cmp.Diff(string(want), out.String()); diff != "" {
		t.Errorf("the plan comment differs from %s (-want +got):\n%s", golden, diff)
	}
}
