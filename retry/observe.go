package retry

import "time"

// Observer is told what the helper does, to count it (package
// retry/retrymetrics implements it with Prometheus metrics). Its methods
// are called from the handlers' goroutines: they must be quick and safe for
// concurrent use. Embed NopObserver to implement only some of them.
type Observer interface {
	// Retried reports a retry copy confirmed by the broker, before the
	// original is acked. attempt is the attempt the copy becomes (2 for
	// the first retry).
	Retried(queue string, attempt int)
	// DeadLettered reports a DLQ copy confirmed by the broker, before the
	// original is acked, with the reason in its
	// contract.HeaderDeadLetterReason: contract.ReasonRejected,
	// contract.ReasonExhausted or ReasonMalformedAttempt.
	DeadLettered(queue, reason string)
	// Settled reports every delivery settled through Handle, Settle, Retry,
	// Reject or Ack, once it is where s.Outcome says (or the settling
	// failed, s.Err).
	Settled(s Settlement)
	// ConfirmsPending reports a change in the number of copies published
	// and waiting for the broker's confirmation: +1 at a publish, -1 when
	// its answer came or the wait was given up.
	ConfirmsPending(queue string, delta int)
	// Connected reports that Consume is consuming queue on a new
	// connection: reconnect is false for its first, true for every one
	// after a lost connection or consumer.
	Connected(queue string, reconnect bool)
}

// Settlement is what became of one delivery.
type Settlement struct {
	Queue     string
	MessageID string
	// Attempt is the delivery's attempt number (1 for a first delivery);
	// 0 when its attempt header is malformed.
	Attempt int
	Outcome Outcome
	// Reason is the dead-letter reason of a DeadLettered outcome.
	Reason string
	// Delay is the delay before the next attempt of a Retried outcome,
	// when the helper chose or knows it (DelayKnown): through the delay
	// ladder (WithLevels), and on a native queue. Other layouts delay a
	// retry by the TTL of the wait queue the retry exchange routes it
	// to, which the topology knows and the helper does not.
	Delay      time.Duration
	DelayKnown bool
	// Handled is how long the handler ran; 0 when the delivery was not
	// settled through Handle.
	Handled time.Duration
	// Err is the settling error (see Settle); nil when the delivery is
	// where Outcome says.
	Err error
}

// NopObserver does nothing; embed it in an Observer that needs only some
// of the methods.
type NopObserver struct{}

func (NopObserver) Retried(string, int)         {}
func (NopObserver) DeadLettered(string, string) {}
func (NopObserver) Settled(Settlement)          {}
func (NopObserver) ConfirmsPending(string, int) {}
func (NopObserver) Connected(string, bool)      {}

// multiObserver tells every observer in turn; nil or empty tells none.
type multiObserver []Observer

func (m multiObserver) Retried(queue string, attempt int) {
	for _, o := range m {
		o.Retried(queue, attempt)
	}
}

func (m multiObserver) DeadLettered(queue, reason string) {
	for _, o := range m {
		o.DeadLettered(queue, reason)
	}
}

func (m multiObserver) Settled(s Settlement) {
	for _, o := range m {
		o.Settled(s)
	}
}

func (m multiObserver) ConfirmsPending(queue string, delta int) {
	for _, o := range m {
		o.ConfirmsPending(queue, delta)
	}
}

func (m multiObserver) Connected(queue string, reconnect bool) {
	for _, o := range m {
		o.Connected(queue, reconnect)
	}
}
