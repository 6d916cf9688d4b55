package main

import (
	"cmp"
	"fmt"

	"github.com/rmqtopo/rmqtopo/ops"
)

// moveCmd moves a queue's messages, as they are, into another queue: the
// path of a queue renamed in the spec (docs/plan-apply.md, "Renaming a
// queue").
type moveCmd struct {
	Queue  string `arg:"" name:"QUEUE" help:"The queue to move messages out of, e.g. the old name of a renamed queue."`
	To     string `required:"" placeholder:"QUEUE" help:"The existing queue to move them into."`
	Limit  int    `short:"n" help:"Move at most this many messages (0: all)." default:"0"`
	DryRun bool   `name:"dry-run" help:"Count the messages that would move; move nothing."`
	opsQueueFlags
}

func (c *moveCmd) Run(e *env) error {
	if c.Limit < 0 {
		return fmt.Errorf("--limit must be 0 or more, got %d", c.Limit)
	}
	b, err := c.broker(e)
	if err != nil {
		return err
	}
	results, err := ops.MoveQueue(e.ctx, b, ops.MoveRequest{Vhost: cmp.Or(c.Vhost, "/"), Queue: c.Queue, To: c.To,
		Limit: c.Limit, Window: c.Window, DryRun: c.DryRun, Log: e.stderr})
	return c.finish(e, results, vhostHint(err, c.Vhost == ""))
}
