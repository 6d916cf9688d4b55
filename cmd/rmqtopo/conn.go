package main

import (
	"cmp"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/rmqtopo/rmqtopo/internal/broker"
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
	ClientCert         string        `name:"client-cert" and:"client-tls" placeholder:"FILE" help:"PEM client certificate for mutual TLS."`
	ClientKey          string        `name:"client-key" and:"client-tls" placeholder:"FILE" help:"PEM key of --client-cert."`
	InsecureSkipVerify bool          `name:"insecure-skip-verify" help:"Do not verify the broker's certificate (testing only)."`
	Timeout            time.Duration `name:"timeout" help:"Bound on every call to the broker." default:"30s"`
}

func (f *connFlags) config(e *env) (broker.Config, error) {
	cfg := broker.Config{
		URL:     cmp.Or(f.URL, e.getenv("RMQTOPO_URL"), broker.DefaultURL),
		AMQPURL: cmp.Or(f.AMQPURL, e.getenv("RMQTOPO_AMQP_URL")),
		User:    cmp.Or(f.User, e.getenv("RMQTOPO_USER")),
		Timeout: f.Timeout,
		Flags: broker.Flags{URL: "--url", Timeout: "--timeout", AllowDestroy: "--allow-destroy", AMQPURL: "--amqp-url",
			CACert: "--ca-cert", ClientCert: "--client-cert", ClientKey: "--client-key"},
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

// client is the management API client of the flags; its errors are the
// flags' (inputError): it connects to nothing yet.
func (f *connFlags) client(e *env) (*broker.Client, error) { return f.waitingClient(e, nil) }

// waitingClient is client, telling onWait of each call that waits for the
// broker (broker.Config.OnWait), for a progress line.
func (f *connFlags) waitingClient(e *env, onWait func(what string) (end func())) (*broker.Client, error) {
	cfg, err := f.config(e)
	if err != nil {
		return nil, input(err)
	}
	cfg.OnWait = onWait
	client, err := broker.NewClient(cfg)
	if err != nil {
		return nil, input(err)
	}
	e.hide(client.Secrets)
	return client, nil
}
