package main

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/rmqtopo/rmqtopo/apply"
	"github.com/rmqtopo/rmqtopo/internal/broker"
	"github.com/rmqtopo/rmqtopo/plan"
	"github.com/rmqtopo/rmqtopo/topology"
)

// notDoneText lists the first three changes not made and says whether
// applying again can finish, by the kind of error that stopped the apply.
func TestNotDoneByErrorKind(t *testing.T) {
	create := func(name string) plan.Change {
		return plan.Change{Action: plan.Create, Address: topology.Address{Kind: topology.KindExchange, Vhost: "v", Name: name}}
	}
	res := apply.Result{NotDone: []plan.Change{create("a"), create("b"), create("c"), create("d")}}
	kind := func(k error) error { return fmt.Errorf("create queue: %w", &broker.Error{Kind: k, Msg: "m"}) }
	for err, want := range map[error]string{
		kind(broker.ErrUnreachable): "The connection failed",
		kind(broker.ErrTimeout):     "The connection failed",
		kind(broker.ErrNodeDown):    "A cluster node is down",
		kind(broker.ErrNotEmpty):    "Plan again once the cause above is gone.",
		kind(broker.ErrLocked):      "Plan again once the cause above is gone.",
		kind(broker.ErrRefused):     "The broker refused a change: applying again will fail the same way",
	} {
		got := notDoneText(res, err)
		if !strings.HasPrefix(got, `4 changes not made: create exchange "a" in vhost "v", create exchange "b" in vhost "v", create exchange "c" in vhost "v", and 1 more.`) ||
			!strings.Contains(got, want) {
			t.Errorf("%v: %q lacks %q", err, got, want)
		}
	}
}

func TestApplyProgressLine(t *testing.T) {
	for _, tt := range []struct {
		p    apply.Progress
		want string
	}{
		{apply.Progress{}, "apply: reading the broker and planning (1s)"},
		{apply.Progress{Step: apply.StepRecords, Total: 16000}, "apply: 0/16000 changes, recording ownership (1s)"},
		{apply.Progress{Step: "queue", Done: 9000, Total: 16000}, "apply: 9000/16000 changes, queue phase (1s)"},
	} {
		if got := applyProgressLine(tt.p, 1200*time.Millisecond); got != tt.want {
			t.Errorf("%+v: got %q, want %q", tt.p, got, tt.want)
		}
	}
}

func TestResultText(t *testing.T) {
	if got := resultText(apply.Result{Created: 5, Deleted: 4}); got != "5 created, 4 deleted" {
		t.Errorf("got %q", got)
	}
	if got := resultText(apply.Result{}); got != "nothing changed" {
		t.Errorf("got %q", got)
	}
}

// The CLI words the library's kinds with its flags, and keeps the kinds.
func TestFlagWords(t *testing.T) {
	held := &broker.Error{Kind: broker.ErrLocked, Msg: "another rmqtopo apply holds the lock"}
	err := applyError(&apply.LockTimeoutError{Vhost: "v", Waited: 5 * time.Second, Err: held})
	if err.Error() != "waited 5s (--lock-timeout): another rmqtopo apply holds the lock" || !errors.Is(err, broker.ErrLocked) {
		t.Errorf("lock timeout: %v", err)
	}
	d := func(code string) plan.Diagnostic { return plan.Diagnostic{Code: code, Severity: plan.SeverityError} }
	err = blockingError([]plan.Diagnostic{d(plan.CodeReplaceQueueWithMessages), d(plan.CodeQueueHasConsumers)})
	var be *plan.BlockedError
	if err.Error() != "2 changes put messages at risk (RT001, RT006); apply refuses without --allow-destroy" || !errors.As(err, &be) {
		t.Errorf("at risk: %v", err)
	}
	refused := []plan.Diagnostic{d(plan.CodeTransientQueue)}
	if err := blockingError(refused); err.Error() != plan.BlockingError(refused).Error() {
		t.Errorf("refused: %v", err)
	}
}

// A bad --rabbitmq-version is the library's typed error, worded with the
// flag's name as before the library named none.
func TestFlagWordsVersionOverride(t *testing.T) {
	_, err := plan.JudgeVersion("four", nil, plan.FromBroker)
	got := flagWords(fmt.Errorf("review: %w", err))
	var ve *plan.VersionOverrideError
	if got.Error() != `--rabbitmq-version: rabbitmq version "four": want MAJOR.MINOR[.PATCH], e.g. 4.0.5` || !errors.As(got, &ve) {
		t.Errorf("got %v", got)
	}
}
