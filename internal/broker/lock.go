package broker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

const lockPurpose = "apply lock"

// Lock takes vhost's apply lock: the exclusive queue LockQueue, declared on
// a connection that stays open until Close. If another connection holds
// it, the error is ErrLocked and names the holder when the broker says who
// it is. A vhost that does not exist gives ErrVhostNotFound. Locking a
// vhost already locked by this session succeeds.
func (s *Session) Lock(ctx context.Context, vhost string) error {
	vc := s.conn(vhost)
	vc.mu.Lock()
	defer vc.mu.Unlock()
	if vc.lock != nil && !vc.lock.IsClosed() {
		return nil
	}
	conn, err := s.Dial(vhost, lockPurpose)
	if err != nil {
		return fmt.Errorf("lock vhost %q: %w", vhost, err)
	}
	ch, err := conn.Channel()
	if err == nil {
		_, err = ch.QueueDeclare(LockQueue, false, true, true, false, nil)
	}
	if err != nil {
		_ = CloseConn(conn)
		var ae *amqp.Error
		if errors.As(err, &ae) && ae.Code == amqp.ResourceLocked {
			holder, in := s.lockHolder(ctx, vhost), ""
			if holder != "" {
				in = " (" + holder + ")"
			}
			return &Error{Kind: ErrLocked, Status: ae.Code, Err: err, Holder: holder,
				Msg: fmt.Sprintf("another rmqtopo apply holds the lock on vhost %q%s; wait for it to finish", vhost, in)}
		}
		return fmt.Errorf("lock vhost %q: %w", vhost, amqpError(s.display, err))
	}
	vc.lock = conn
	vc.lockLost.Store(false)
	closed := conn.NotifyClose(make(chan *amqp.Error, 1))
	go func() {
		if e := <-closed; e != nil {
			vc.lockLost.Store(true)
		}
	}()
	return nil
}

// releaseLock deletes the lock queue on its own connection before that
// connection closes: the broker answers queue.delete once the queue is
// gone, so the lock is free when Close returns, where the exclusive
// queue's deletion with its connection happens after the close-ok (seen on
// 4.3.6: an apply started right after another was refused). A broker that
// does not answer within closeWait leaves it to the connection's end.
func releaseLock(conn *amqp.Connection) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		if ch, err := conn.Channel(); err == nil {
			_, _ = ch.QueueDelete(LockQueue, false, false, false)
		}
	}()
	t := time.NewTimer(closeWait)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
	}
}

// lockHolder names the connection holding vhost's lock, best effort: the
// management API learns a queue's owner and a connection's name from
// statistics emitted every few seconds, so a lock taken a moment ago is
// reported without its holder ("").
func (s *Session) lockHolder(ctx context.Context, vhost string) string {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	var q struct {
		Owner json.RawMessage `json:"owner_pid_details"`
	}
	var owner struct {
		Name string `json:"name"`
	}
	// Before statistics arrive the owner is an empty list, not an object.
	if s.do(ctx, http.MethodGet, "/api/queues/"+esc(vhost)+"/"+esc(LockQueue), url.Values{"columns": {"owner_pid_details"}}, nil, &q) != nil ||
		json.Unmarshal(q.Owner, &owner) != nil || owner.Name == "" {
		return ""
	}
	var c struct {
		Props struct {
			Name string `json:"connection_name"`
		} `json:"client_properties"`
	}
	if s.do(ctx, http.MethodGet, "/api/connections/"+esc(owner.Name), nil, nil, &c) != nil || c.Props.Name == "" {
		return "connection " + owner.Name
	}
	return fmt.Sprintf("%s, connection %s", c.Props.Name, owner.Name)
}
