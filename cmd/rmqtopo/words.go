package main

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/rmqtopo/rmqtopo/apply"
	"github.com/rmqtopo/rmqtopo/cmd/rmqtopo/flagwords"
	"github.com/rmqtopo/rmqtopo/contract"
	"github.com/rmqtopo/rmqtopo/internal/broker"
	"github.com/rmqtopo/rmqtopo/internal/english"
	"github.com/rmqtopo/rmqtopo/ops"
	"github.com/rmqtopo/rmqtopo/plan"
	"github.com/rmqtopo/rmqtopo/plan/planjson"
	"github.com/rmqtopo/rmqtopo/spec"
)

// resultText is a one-line account of what an apply did.
func resultText(r apply.Result) string {
	var parts []string
	add := func(n int, what string) {
		if n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, what))
		}
	}
	add(r.Created, "created")
	add(r.Replaced, "replaced")
	add(r.Updated, "updated")
	add(r.Deleted, "deleted")
	add(r.Migrated, "migrated")
	if len(parts) == 0 {
		return "nothing changed"
	}
	return strings.Join(parts, ", ")
}

// notDoneText says what an apply that stopped with err did not do, and
// whether running it again can finish, by the kind of the broker's
// error: not when the broker refused a change, which it will refuse again
// until the spec or the broker changes.
func notDoneText(res apply.Result, err error) string {
	var b strings.Builder
	b.WriteString(english.Count(len(res.NotDone), "change", "changes") + " not made")
	for i, c := range res.NotDone {
		if i == 3 {
			fmt.Fprintf(&b, ", and %d more", len(res.NotDone)-3)
			break
		}
		sep := ","
		if i == 0 {
			sep = ":"
		}
		fmt.Fprintf(&b, "%s %s %s", sep, c.Action, c.Address)
	}
	b.WriteString(". The ownership record lists what exists. ")
	switch {
	case errors.Is(err, broker.ErrUnreachable), errors.Is(err, broker.ErrTimeout), errors.Is(err, broker.ErrServer):
		b.WriteString("The connection failed: planning and applying again finishes the job once the broker is reachable.")
	case errors.Is(err, broker.ErrNodeDown):
		b.WriteString("A cluster node is down (above): planning and applying again finishes the job once it is back.")
	case errors.Is(err, broker.ErrNotEmpty), errors.Is(err, broker.ErrLocked):
		b.WriteString("Plan again once the cause above is gone.")
	default:
		b.WriteString("The broker refused a change: applying again will fail the same way until the spec or the broker changes.")
	}
	return b.String()
}

// applyProgressLine says where an apply is: the step, changes done of the
// total, and the time since it began.
func applyProgressLine(p apply.Progress, elapsed time.Duration) string {
	el := elapsed.Round(time.Second)
	switch {
	case p.Step == "" || p.Step == apply.StepPlanning:
		return fmt.Sprintf("apply: %s (%s)", apply.StepPlanning, el)
	case p.Step == apply.StepRecords:
		return fmt.Sprintf("apply: %d/%d changes, %s (%s)", p.Done, p.Total, p.Step, el)
	}
	return fmt.Sprintf("apply: %d/%d changes, %s phase (%s)", p.Done, p.Total, p.Step, el)
}

// applyWaitLine says what an apply waits for, and how long it has waited.
func applyWaitLine(what string, waited time.Duration) string {
	return fmt.Sprintf("apply: waiting for %s (%s so far)", what, waited.Round(time.Second))
}

// lockHolder names the holder of a lock another apply holds, from the
// broker's refusal: its connection, once the broker's statistics name it.
func lockHolder(refusal error) string {
	var be *broker.Error
	if errors.As(refusal, &be) && be.Holder != "" {
		return be.Holder
	}
	return "another rmqtopo apply (the broker does not name it yet)"
}

// applyError words the apply workflow's error kinds that a flag changes.
func applyError(err error) error {
	var lt *apply.LockTimeoutError
	if errors.As(err, &lt) {
		return worded{fmt.Sprintf("waited %s (--lock-timeout): %v", lt.Waited, lt.Err), err}
	}
	return err
}

// blockingError is plan.BlockingError worded for the CLI: what only puts
// messages at risk names the flag that accepts it.
func blockingError(b []plan.Diagnostic) error {
	err := plan.BlockingError(b)
	var be *plan.BlockedError
	if errors.As(err, &be) && be.OnlyAtRisk() {
		return worded{be.AtRisk() + "; apply refuses without --allow-destroy", err}
	}
	return err
}

// planfileError words planjson.Read's errors for the CLI.
func planfileError(err error) error {
	var np *planjson.NotAPlanError
	if errors.As(err, &np) {
		return worded{fmt.Sprintf("%s is JSON but not a plan saved by 'rmqtopo plan --out'", np.Path), err}
	}
	return err
}

// flagWords words the libraries' errors that a flag of the CLI answers:
// the library says what is wrong, the CLI which flag changes it.
func flagWords(err error) error {
	var (
		size  *spec.SizeError
		win   *ops.WindowError
		name  *ops.NotDLQNameError
		nf    *ops.QueueNotFoundError
		undec *ops.UndeclaredTargetError
		ver   *plan.VersionOverrideError
	)
	switch {
	case errors.As(err, &size):
		return worded{fmt.Sprintf("%s: larger than the spec size limit of %s; raise it with --max-spec-size if the file is really a spec",
			size.Path, spec.FormatSize(size.Limit)), err}
	case errors.As(err, &win):
		return worded{fmt.Sprintf("--window must be between 1 and 65535, got %d", win.Window), err}
	case errors.As(err, &name):
		return worded{fmt.Sprintf("queue %q is not named like a DLQ (%q); give the work queue with --to", name.Queue, contract.DeadLetterQueue("QUEUE")), err}
	case errors.As(err, &nf) && nf.Work:
		return worded{nf.Error() + "; give the queue to replay to with --to", err}
	case errors.As(err, &undec):
		return worded{fmt.Sprintf("target %q of queue %q is not a queue of any --spec; pass the spec that declares it, or --unmanaged-target to use a queue no spec manages",
			undec.Target, undec.Queue), err}
	case errors.As(err, &ver):
		return worded{flagwords.RabbitMQVersion + ": " + ver.Err.Error(), err}
	}
	return err
}

// worded is a library's error in the CLI's words; errors.Is and errors.As
// still see the library's.
type worded struct {
	msg string
	err error
}

func (w worded) Error() string { return w.msg }
func (w worded) Unwrap() error { return w.err }
