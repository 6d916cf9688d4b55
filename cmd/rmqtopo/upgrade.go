package main

import (
	"cmp"
	"errors"
	"fmt"
	"slices"

	"github.com/rmqtopo/rmqtopo/internal/exitcode"
	"github.com/rmqtopo/rmqtopo/internal/upgrade"
	"github.com/rmqtopo/rmqtopo/internal/upgrade/live"
	"github.com/rmqtopo/rmqtopo/topology"
)

// upgradeCmd groups the commands of a move to another RabbitMQ release,
// listed in a group of their own as dlqCmd's are (their longer names
// would widen the main column).
type upgradeCmd struct {
	Preview upgradePreviewCmd `cmd:"" group:"Upgrades:" help:"Judge a live vhost against a target RabbitMQ release: what it refuses, ignores or does differently, and the route there."`
	Move    upgradeMoveCmd    `cmd:"" group:"Upgrades:" help:"Move every message of the specs' queues from the old (blue) broker to the new (green) one, retries at their time and attempt."`
}

type upgradePreviewCmd struct {
	Files            []string    `arg:"" optional:"" name:"FILE" help:"Spec files: judge their vhosts (all of each vhost, not only the spec's objects)."`
	To               string      `name:"to" placeholder:"RELEASE" help:"The target release: MAJOR.MINOR.PATCH, or a series (4.0, 4.3) for its newest patch rmqtopo knows (4.0.5, 4.3.6). Required unless --target-url names a live target, whose release it then is."`
	Vhost            string      `name:"vhost" help:"The vhost to judge when no spec file is given." default:"/"`
	Format           string      `short:"f" help:"Output format: text or json." enum:"text,json" default:"text"`
	DetailedExitCode bool        `name:"detailed-exitcode" help:"Exit 9 when the target only ignores or changes something (warnings); refusals exit 8 with or without it."`
	Conn             connFlags   `embed:""`
	Target           targetFlags `embed:""`
}

// targetFlags name a live broker of the target release (green),
// optional: the preview then reads which plugins' exchange types it has
// enabled instead of taking none. Not a second connFlags: kong would
// join its client-certificate group with --client-cert's.
type targetFlags struct {
	URL                string `name:"target-url" placeholder:"URL" help:"Management API URL of a live broker of the target release (optional): judge the exchange types it has enabled, not a fresh install's. Same credentials as --url unless --target-user or --target-password-file."`
	User               string `name:"target-user" help:"User for --target-url."`
	PasswordFile       string `name:"target-password-file" placeholder:"FILE" help:"Read --target-url's password from the first line of FILE."`
	CACert             string `name:"target-ca-cert" placeholder:"FILE" help:"PEM CA certificates to verify --target-url with."`
	InsecureSkipVerify bool   `name:"target-insecure-skip-verify" help:"Do not verify --target-url's certificate (testing only)."`
}

// conn is the target's connection flags: the source's, with the
// target's URL and whatever the target flags set.
func (t targetFlags) conn(src connFlags) connFlags {
	c := connFlags{URL: t.URL, User: cmp.Or(t.User, src.User), Password: src.Password, PasswordFile: cmp.Or(t.PasswordFile, src.PasswordFile),
		CACert: t.CACert, InsecureSkipVerify: t.InsecureSkipVerify, Timeout: src.Timeout}
	if t.User != "" || t.PasswordFile != "" {
		c.Password = ""
	}
	return c
}

// Run reads each vhost, judges it and renders the reports; refusals exit
// exitcode.UpgradeRefused, warnings exitcode.UpgradeWarnings with
// --detailed-exitcode.
func (c *upgradePreviewCmd) Run(e *env) error {
	if c.To == "" && c.Target.URL == "" {
		return input(fmt.Errorf("--to or --target-url: name the target release, or a live broker of it"))
	}
	vhosts, err := c.vhosts(e)
	if err != nil {
		return err
	}
	client, err := c.Conn.client(e)
	if err != nil {
		return err
	}
	green, err := c.green(e)
	if err != nil {
		return err
	}
	var reports []upgrade.Report
	for _, v := range vhosts {
		snap, err := live.Read(e.ctx, client, v)
		if err != nil {
			return err
		}
		reports = append(reports, upgrade.JudgeGreen(snap, green))
	}
	for _, r := range reports {
		if c.Format == "json" {
			err = upgrade.JSON(e.stdout, r)
		} else {
			err = upgrade.Text(e.stdout, r)
		}
		if err != nil {
			return err
		}
	}
	return previewExit(reports, c.DetailedExitCode)
}

// green is the target: the release --to names, or, with --target-url,
// the live target broker (its exact release, which must be of --to's
// series when both are given, and the exchange types it has enabled).
func (c *upgradePreviewCmd) green(e *env) (upgrade.Green, error) {
	var target topology.Version
	if c.To != "" {
		var err error
		if target, err = upgrade.Target(c.To); err != nil {
			return upgrade.Green{}, input(fmt.Errorf("--to: %w", err))
		}
	}
	if c.Target.URL == "" {
		return upgrade.Green{Version: target}, nil
	}
	conn := c.Target.conn(c.Conn)
	client, err := conn.client(e)
	if err != nil {
		return upgrade.Green{}, err
	}
	g, err := live.ReadGreen(e.ctx, client)
	if err != nil {
		return g, err
	}
	if c.To != "" && (g.Version.Major != target.Major || g.Version.Minor != target.Minor) {
		return g, input(fmt.Errorf("--target-url runs RabbitMQ %s, not the --to release %s", g.Version, target))
	}
	return g, nil
}

func (c *upgradePreviewCmd) vhosts(e *env) ([]string, error) {
	if len(c.Files) == 0 {
		return []string{c.Vhost}, nil
	}
	files, err := loadSpecs(e, c.Files)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, f := range files {
		if !slices.Contains(out, f.Spec.Vhost) {
			out = append(out, f.Spec.Vhost)
		}
	}
	return out, nil
}

func previewExit(reports []upgrade.Report, detailed bool) error {
	warnings := false
	for _, r := range reports {
		if r.Errors() > 0 {
			return &ExitError{Code: exitcode.UpgradeRefused, Err: errors.New("the target release refuses what the vhost holds (see the error verdicts)")}
		}
		warnings = warnings || len(r.Verdicts) > 0
	}
	if detailed && warnings {
		return &ExitError{Code: exitcode.UpgradeWarnings}
	}
	return nil
}
