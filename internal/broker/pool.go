package broker

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	amqp "github.com/rabbitmq/amqp091-go"
)

type vhostConn struct {
	mu       sync.Mutex
	lock     *amqp.Connection
	lockLost atomic.Bool
	work     *amqp.Connection
	idle     []*amqp.Channel
}

func (s *Session) conn(vhost string) *vhostConn {
	s.mu.Lock()
	defer s.mu.Unlock()
	vc := s.vhosts[vhost]
	if vc == nil {
		vc = &vhostConn{}
		s.vhosts[vhost] = vc
	}
	return vc
}

// channel takes an idle channel of vhost's write connection or opens one,
// dialling the connection if it is not open.
func (s *Session) channel(vhost string) (*vhostConn, *amqp.Channel, error) {
	vc := s.conn(vhost)
	vc.mu.Lock()
	defer vc.mu.Unlock()
	if vc.lock != nil && vc.lockLost.Load() {
		return nil, nil, &Error{Kind: ErrLocked, Msg: fmt.Sprintf("lost the lock on vhost %q: its connection closed; stopping", vhost)}
	}
	for len(vc.idle) > 0 {
		ch := vc.idle[len(vc.idle)-1]
		vc.idle = vc.idle[:len(vc.idle)-1]
		if !ch.IsClosed() {
			return vc, ch, nil
		}
	}
	if vc.work == nil || vc.work.IsClosed() {
		conn, err := s.Dial(vhost, "apply")
		if err != nil {
			return nil, nil, err
		}
		vc.work, vc.idle = conn, nil
	}
	ch, err := vc.work.Channel()
	if err != nil {
		return nil, nil, amqpError(s.display, err)
	}
	return vc, ch, nil
}

func (vc *vhostConn) put(ch *amqp.Channel) {
	vc.mu.Lock()
	defer vc.mu.Unlock()
	if !ch.IsClosed() {
		vc.idle = append(vc.idle, ch)
	}
}

// withChannel runs one synchronous AMQP method on a pooled channel of
// vhost. The broker answers an error by closing the channel, so a channel
// only returns to the pool after success. The timeout closes the channel,
// which is the only way to abandon a call in amqp091.
func (s *Session) withChannel(ctx context.Context, vhost string, fn func(*amqp.Channel) error) error {
	if err := ctx.Err(); err != nil {
		return &Error{Kind: ErrTimeout, Msg: "interrupted", Err: err}
	}
	vc, ch, err := s.channel(vhost)
	if err != nil {
		return err
	}
	opCtx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	stop := context.AfterFunc(opCtx, func() { ch.Close() })
	err = fn(ch)
	if !stop() {
		if ctx.Err() != nil {
			return &Error{Kind: ErrTimeout, Msg: "interrupted", Err: ctx.Err()}
		}
		return &Error{Kind: ErrTimeout, Msg: fmt.Sprintf("AMQP at %s did not answer within %s%s", s.display, s.timeout, hint(" (%s)", s.cfg.Flags.Timeout))}
	}
	if err != nil {
		ch.Close()
		return amqpError(s.display, err)
	}
	vc.put(ch)
	return nil
}
