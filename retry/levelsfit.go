package retry

import (
	"errors"
	"fmt"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/rmqtopo/rmqtopo/contract"
)

// errMisfit marks a Retrier configured for another topology than its
// queue's: a configuration error, which no reconnection cures.
var errMisfit = errors.New("retry helper configured for another layout")

// fatalAtStart reports whether err, at Consume's first start, ends Consume
// rather than being retried: a missing topology or a misfit option.
func fatalAtStart(err error) bool {
	return errors.Is(err, errTopology) || errors.Is(err, errMisfit)
}

// checkLevels refuses what would turn retries into something else: no
// WithLevels for a queue whose delayed retries go through the delay
// ladder (its contract.LevelsMarker exists), whose copies the ladder
// would return as if the schedule were over; and WithLevels for a queue
// whose retries do not, whose wait queues would dead-letter the copies,
// routed by the ladder's key, to no queue. It then checks that the
// ladder given exists.
func checkLevels(conn *amqp.Connection, queue string, l *levels) error {
	marker := contract.LevelsMarker(queue)
	ladder, err := exchangeExists(conn, marker)
	if err != nil {
		return fmt.Errorf("retry: checking the levels marker %q of queue %q: %w", marker, queue, err)
	}
	switch {
	case ladder && l == nil:
		return fmt.Errorf("retry: queue %q retries through the delay ladder (layout levels; exchange %q exists): "+
			"give retry.WithLevels(ladder, backoff) with the spec's levels and retry policy: %w", queue, marker, errMisfit)
	case !ladder && l != nil:
		return fmt.Errorf("retry: queue %q does not retry through a delay ladder (no exchange %q): its layout is not levels, "+
			"so drop retry.WithLevels; or its topology predates levels markers: run `rmqtopo apply`: %w", queue, marker, errMisfit)
	case l == nil:
		return nil
	case l.backoff == nil:
		return fmt.Errorf("retry: WithLevels needs a backoff: %w", errMisfit)
	}
	return checkExchange(conn, l.ladder.EntryExchange(), "topic",
		fmt.Sprintf("the delay ladder of queue %q", queue))
}

// exchangeExists passively declares an exchange on a channel of its own
// (a failed passive declare closes its channel).
func exchangeExists(conn *amqp.Connection, name string) (bool, error) {
	ch, err := conn.Channel()
	if err != nil {
		return false, fmt.Errorf("opening a channel: %w", err)
	}
	defer ch.Close()
	err = ch.ExchangeDeclarePassive(name, "fanout", true, false, false, false, nil)
	var aerr *amqp.Error
	switch {
	case err == nil:
		return true, nil
	case errors.As(err, &aerr) && aerr.Code == amqp.NotFound:
		return false, nil
	}
	return false, err
}
