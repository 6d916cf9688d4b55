package main

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/rmqtopo/rmqtopo/internal/broker"
	"github.com/rmqtopo/rmqtopo/internal/definitions"
	"github.com/rmqtopo/rmqtopo/plan"
	"github.com/rmqtopo/rmqtopo/topology"
)

// connFlags say how to reach the broker. Each has an environment variable,
// read through env.getenv; a flag beats its variable.
type connFlags struct {
	URL                string        `name:"url" placeholder:"URL" help:"Management API URL; userinfo is accepted (env RMQTOPO_URL, default http://127.0.0.1:15672)."`
	AMQPURL            string        `name:"amqp-url" placeholder:"URL" help:"AMQP URL for the apply lock and writes (env RMQTOPO_AMQP_URL; default: the management URL's host, the broker's AMQP port, the same credentials)."`
	User               string        `name:"user" help:"User (env RMQTOPO_USER; default: the URL's userinfo, else guest)."`
	Password           string        `name:"password" help:"Password (env RMQTOPO_PASSWORD). Prefer --password-file or the environment: flags show in ps."`
	PasswordFile       string        `name:"password-file" placeholder:"FILE" help:"Read the password from the first line of FILE."`
	CACert             string        `name:"ca-cert" placeholder:"FILE" help:"PEM CA certificates to verify the broker with (https:// and amqps://)."`
	ClientCert         string        `name:"client-cert" placeholder:"FILE" help:"PEM client certificate for mutual TLS."`
	ClientKey          string        `name:"client-key" placeholder:"FILE" help:"PEM key of --client-cert."`
	InsecureSkipVerify bool          `name:"insecure-skip-verify" help:"Do not verify the broker's certificate (testing only)."`
	Timeout            time.Duration `name:"timeout" help:"Bound on every call to the broker." default:"30s"`
}

func firstNonEmpty(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}

func (f *connFlags) config(e *env) (broker.Config, error) {
	cfg := broker.Config{
		URL:     firstNonEmpty(f.URL, e.getenv("RMQTOPO_URL"), broker.DefaultURL),
		AMQPURL: firstNonEmpty(f.AMQPURL, e.getenv("RMQTOPO_AMQP_URL")),
		User:    firstNonEmpty(f.User, e.getenv("RMQTOPO_USER")),
		Timeout: f.Timeout,
	}
	cfg.Password = f.Password
	if cfg.Password == "" && f.PasswordFile != "" {
		b, err := os.ReadFile(f.PasswordFile)
		if err != nil {
			return cfg, fmt.Errorf("--password-file: %w", err)
		}
		line, _, _ := strings.Cut(string(b), "\n")
		cfg.Password = strings.TrimRight(line, "\r")
	}
	if cfg.Password == "" {
		cfg.Password = e.getenv("RMQTOPO_PASSWORD")
	}
	if f.CACert != "" || f.ClientCert != "" || f.ClientKey != "" || f.InsecureSkipVerify {
		t := &tls.Config{InsecureSkipVerify: f.InsecureSkipVerify}
		if f.CACert != "" {
			pem, err := os.ReadFile(f.CACert)
			if err != nil {
				return cfg, fmt.Errorf("--ca-cert: %w", err)
			}
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM(pem) {
				return cfg, fmt.Errorf("--ca-cert: no PEM certificate in %s", f.CACert)
			}
			t.RootCAs = pool
		}
		if (f.ClientCert == "") != (f.ClientKey == "") {
			return cfg, errors.New("--client-cert and --client-key go together")
		}
		if f.ClientCert != "" {
			cert, err := tls.LoadX509KeyPair(f.ClientCert, f.ClientKey)
			if err != nil {
				return cfg, fmt.Errorf("--client-cert: %w", err)
			}
			t.Certificates = []tls.Certificate{cert}
		}
		cfg.TLS = t
	}
	return cfg, nil
}

func (f *connFlags) client(e *env) (*broker.Client, error) {
	cfg, err := f.config(e)
	if err != nil {
		return nil, err
	}
	return broker.NewClient(cfg)
}

// againstState is the "live" state of --against: an empty broker, or a
// definitions export (multi-vhost, or the single-vhost form without vhost
// fields when the spec has one vhost). A file records no ownership and no
// message counts, so such a plan prunes nothing and flags every queue
// replace as of unknown count.
func againstState(against string, vhosts []string) (*broker.State, error) {
	st := &broker.State{Vhosts: vhosts, Owned: map[topology.Address]bool{}, Messages: map[topology.Address]int64{}}
	if against == "empty" {
		return st, nil
	}
	data, err := os.ReadFile(against)
	if err != nil {
		return nil, fmt.Errorf("plan: --against: %w", err)
	}
	def := ""
	if len(vhosts) == 1 {
		def = vhosts[0]
	}
	doc, err := definitions.Decode(data, def)
	if err != nil {
		return nil, fmt.Errorf("plan: --against %s: %w", against, err)
	}
	t := broker.Clean(doc.ToTopology(vhosts...))
	if len(doc.Vhosts) == 0 && def != "" {
		// A single-vhost export has no vhost list; it describes def.
		t.Vhosts = []string{def}
	}
	st.Topology = t
	return st, nil
}

// savedPlanKind marks a JSON file as a plan saved by plan --out.
const savedPlanKind = "rmqtopo-plan"

// savedPlanFormat versions the saved plan file; bump on incompatible change.
const savedPlanFormat = 1

// savedPlan is the file plan --out writes and apply FILE reads; the
// format is documented in docs/plan-apply.md.
type savedPlan struct {
	Kind          string    `json:"kind"`
	FormatVersion int       `json:"format_version"`
	CreatedAt     time.Time `json:"created_at"`
	// Broker is the management URL the plan was made against, for people.
	Broker string   `json:"broker"`
	Vhosts []string `json:"vhosts"`
	// Fingerprint is broker.State.Fingerprint of the state planned from.
	Fingerprint string            `json:"fingerprint"`
	Prune       bool              `json:"prune"`
	Plan        plan.Plan         `json:"plan"`
	Diagnostics []plan.Diagnostic `json:"diagnostics"`
}

func newSavedPlan(brokerURL string, st *broker.State, prune bool, p plan.Plan, diags []plan.Diagnostic) *savedPlan {
	if diags == nil {
		diags = []plan.Diagnostic{}
	}
	return &savedPlan{Kind: savedPlanKind, FormatVersion: savedPlanFormat, CreatedAt: time.Now().UTC().Round(time.Second),
		Broker: brokerURL, Vhosts: st.Vhosts, Fingerprint: st.Fingerprint(), Prune: prune, Plan: p, Diagnostics: diags}
}

func (sp *savedPlan) write(path string) error {
	b, err := json.MarshalIndent(sp, "", "  ")
	if err != nil {
		return err
	}
	// Write then rename, so a crash never leaves half a plan to apply.
	tmp, err := os.CreateTemp(filepath.Dir(path), ".rmqtopo-plan-*")
	if err != nil {
		return err
	}
	if _, err := tmp.Write(append(b, '\n')); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return err
	}
	if err := tmp.Close(); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// readSavedPlan returns the plan saved in path, or nil if path is not a
// saved plan (a spec; spec files may be JSON too, so the "kind" decides).
func readSavedPlan(path string) (*savedPlan, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, nil // loadSpecs reports it with the spec's wording
	}
	if !bytes.HasPrefix(bytes.TrimSpace(data), []byte("{")) {
		return nil, nil
	}
	var probe struct {
		Kind string `json:"kind"`
	}
	if json.Unmarshal(data, &probe) != nil || probe.Kind != savedPlanKind {
		if strings.HasSuffix(path, ".json") && !looksLikeSpec(data) {
			return nil, fmt.Errorf("apply: %s is JSON but not a plan saved by 'rmqtopo plan --out'", path)
		}
		return nil, nil
	}
	var sp savedPlan
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := dec.Decode(&sp); err != nil {
		return nil, fmt.Errorf("apply: read plan %s: %w", path, err)
	}
	if sp.FormatVersion != savedPlanFormat || sp.Plan.FormatVersion != plan.FormatVersion {
		return nil, fmt.Errorf("apply: %s has plan format %d/%d; this rmqtopo reads %d/%d: plan again with this version",
			path, sp.FormatVersion, sp.Plan.FormatVersion, savedPlanFormat, plan.FormatVersion)
	}
	if sp.Fingerprint == "" || len(sp.Vhosts) == 0 {
		return nil, fmt.Errorf("apply: %s lacks its fingerprint or vhosts", path)
	}
	// JSON numbers come back as json.Number; arguments must be the
	// canonical int64/float64 the broker is sent.
	for i := range sp.Plan.Changes {
		normalizeObject(sp.Plan.Changes[i].Before)
		normalizeObject(sp.Plan.Changes[i].After)
	}
	return &sp, nil
}

func looksLikeSpec(data []byte) bool {
	var probe struct {
		Version any `json:"version"`
	}
	return json.Unmarshal(data, &probe) == nil && probe.Version != nil
}

func normalizeObject(o *plan.Object) {
	if o == nil {
		return
	}
	if o.Exchange != nil {
		o.Exchange.Arguments = topology.NormalizeArgs(o.Exchange.Arguments)
	}
	if o.Queue != nil {
		o.Queue.Arguments = topology.NormalizeArgs(o.Queue.Arguments)
	}
	if o.Binding != nil {
		o.Binding.Arguments = topology.NormalizeArgs(o.Binding.Arguments)
	}
	if o.Policy != nil {
		o.Policy.Definition = topology.NormalizeArgs(o.Policy.Definition)
	}
}
