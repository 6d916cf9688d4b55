package brokertest

// The life of a started node: start, readiness, stop, kill, restart, joining
// a cluster and reading its log.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/rmqtopo/rmqtopo/internal/waitguard"
)

// errPortTaken is start's error for a port of the node already in use.
var errPortTaken = errors.New("is in use")

// start launches the server detached and waits until it is ready.
func (n *Node) start(ctx context.Context) error {
	for _, p := range n.ports() {
		if !portFree(p) {
			return fmt.Errorf("brokertest: cannot start %s: port %d %w%s", n.Name, p, errPortTaken, portHolders(p))
		}
	}
	// A stale pid file would make readiness checks look at a dead process.
	_ = os.Remove(n.PIDFile())
	// The server script runs in the foreground (not -detached) in a session
	// of its own, so that it outlives this process but a boot failure is seen
	// at once (the script exits) and its output, which explains failures that
	// happen before the log file exists, lands in log/startup.log.
	out, err := os.Create(n.StartupLogFile())
	if err != nil {
		return err
	}
	cmd := n.command(context.Background(), "rabbitmq-server")
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		out.Close()
		return n.startErr(err)
	}
	exited := make(chan error, 1)
	go func() {
		err := cmd.Wait()
		out.Close()
		if err == nil {
			err = errors.New("exit status 0")
		}
		exited <- err
	}()
	ctx, cancel := context.WithTimeout(ctx, n.StartTimeout)
	defer cancel()
	if err := n.waitReady(ctx, exited); err != nil {
		n.Kill()
		// Another process took a port between the check above and the
		// node's listening on it (a boot takes seconds): StartNode
		// tries other ports. Seen on make test's node beside the
		// cluster's, which other test binaries start at the same time.
		if b, _ := os.ReadFile(n.StartupLogFile()); bytes.Contains(b, []byte("eaddrinuse")) {
			err = fmt.Errorf("a port %w: %w", errPortTaken, err)
		}
		return n.startErr(err)
	}
	return nil
}

// portHolders lists the sockets on port p and their processes (ss -tanp),
// for an error saying that p is in use; "" where ss cannot tell.
func portHolders(p int) string {
	out, err := exec.Command("ss", "-tanp", fmt.Sprintf("( sport = :%d )", p)).Output()
	if err != nil || len(bytes.TrimSpace(out)) == 0 {
		return ""
	}
	return "; ss -tanp:\n" + strings.TrimSpace(string(out))
}

// ports are the ports the node listens on.
func (n *Node) ports() []int {
	out := []int{n.AMQPPort, n.MgmtPort, n.DistPort}
	if n.AMQPSPort != 0 {
		out = append(out, n.AMQPSPort, n.MgmtTLSPort)
	}
	return out
}

func (n *Node) portsFree() bool {
	for _, p := range n.ports() {
		if !portFree(p) {
			return false
		}
	}
	return true
}

// StartupLogFile holds the output of the server script (of its last start).
func (n *Node) StartupLogFile() string { return filepath.Join(n.Dir, "log", "startup.log") }

func (n *Node) startErr(err error) error {
	return fmt.Errorf("brokertest: starting node %s (dir %s) failed: %w\n"+
		"--- first errors in %s ---\n%s\n--- last lines of %s ---\n%s\n--- last lines of %s ---\n%s",
		n.Name, n.Dir, err,
		n.StartupLogFile(), firstErrors(n.StartupLogFile(), 8),
		n.StartupLogFile(), tailFile(n.StartupLogFile(), 15),
		n.LogFile(), n.LogTail(30))
}

// waitReady waits for the pid file, then for rabbitmqctl await_startup, then
// for the management API, failing early if the OS process dies.
func (n *Node) waitReady(ctx context.Context, exited <-chan error) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	go func() {
		select {
		case err := <-exited:
			cancel(fmt.Errorf("rabbitmq-server exited: %w", err))
		case <-ctx.Done():
		}
	}()
	err := n.waitReadySteps(ctx)
	if c := context.Cause(ctx); c != nil && !errors.Is(c, context.Canceled) {
		return c
	}
	return err
}

func (n *Node) waitReadySteps(ctx context.Context) error {
	// await_startup fails at once while the node is not yet registered with
	// epmd, so first wait for the pid file, which the node writes early.
	var pid int
	for {
		if p, err := n.PID(); err == nil {
			pid = p
			break
		}
		if err := sleep(ctx, 50*time.Millisecond); err != nil {
			return fmt.Errorf("no pid file %s: %w", n.PIDFile(), err)
		}
	}
	// Each rabbitmqctl run boots an Erlang VM (~0.4s), so only call it once
	// the node listens on its distribution port.
	for !dialable(n.DistPort) {
		if !alive(pid) {
			return fmt.Errorf("node process %d exited during startup", pid)
		}
		if err := sleep(ctx, 50*time.Millisecond); err != nil {
			return fmt.Errorf("distribution port %d not listening: %w", n.DistPort, err)
		}
	}
	for {
		if !alive(pid) {
			return fmt.Errorf("node process %d exited during startup", pid)
		}
		// A bound of one try, not a guard: a try that times out is
		// tried again until ctx (StartTimeout) ends.
		_, err := n.Ctl(ctx, "await_startup", "--timeout", "60")
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			return fmt.Errorf("await_startup: %w", err)
		}
		if err := sleep(ctx, 200*time.Millisecond); err != nil {
			return err
		}
	}
	return n.waitMgmt(ctx, pid)
}

// waitMgmt polls GET /api/overview until it answers 200: the management
// plugin starts listening a little after the rabbit application.
func (n *Node) waitMgmt(ctx context.Context, pid int) error {
	// A bound of one poll, not a guard: a request that times out is made
	// again until ctx ends.
	hc := &http.Client{Timeout: 2 * time.Second}
	var last string
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, n.MgmtURL()+"/api/overview", nil)
		req.SetBasicAuth("guest", "guest")
		resp, err := hc.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			last = resp.Status
		} else {
			last = err.Error()
		}
		if pid > 0 && !alive(pid) {
			return fmt.Errorf("node process %d exited while waiting for the management API", pid)
		}
		if err := sleep(ctx, 50*time.Millisecond); err != nil {
			return fmt.Errorf("management API %s not ready (last: %s): %w", n.MgmtURL(), last, err)
		}
	}
}

// PID reads the node's OS pid from its pid file.
func (n *Node) PID() (int, error) {
	b, err := os.ReadFile(n.PIDFile())
	if err != nil {
		return 0, err
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 {
		return 0, fmt.Errorf("bad pid file %s: %q", n.PIDFile(), b)
	}
	return pid, nil
}

// Running reports whether the node's OS process is alive.
func (n *Node) Running() bool {
	pid, err := n.PID()
	return err == nil && alive(pid)
}

// Stop stops the node gracefully with rabbitmqctl stop (which waits for the
// process to exit; about 8s on 3.10 because the management agent waits 5s
// for its statistics collector) and kills it through its pid file if that
// fails. Stopping a node that is not running is not an error. The node's
// directory is kept; Restart starts it again with its data.
func (n *Node) Stop(ctx context.Context) error {
	pid, err := n.PID()
	if err != nil || !alive(pid) {
		return nil
	}
	_, stopErr := n.Ctl(ctx, "stop", n.PIDFile())
	// A hang guard. When rabbitmqctl stop succeeds the process is gone
	// already; when the CLI fails, the node may still be stopping, which
	// takes about 8 s on a quiet machine.
	deadline := waitguard.Deadline(8 * time.Second)
	for alive(pid) && time.Now().Before(deadline) && ctx.Err() == nil {
		time.Sleep(100 * time.Millisecond)
	}
	if alive(pid) {
		n.Kill()
		if stopErr == nil {
			stopErr = errors.New("node did not exit after rabbitmqctl stop")
		}
		return fmt.Errorf("brokertest: graceful stop of %s failed, killed pid %d: %w", n.Name, pid, stopErr)
	}
	return nil
}

// Kill kills the node's Erlang VM with SIGKILL, as a crash would, and waits
// for it to be gone (bounded by a hang guard, 30 s unscaled: it takes
// milliseconds). Its data stays; Restart recovers it.
func (n *Node) Kill() {
	pid, err := n.PID()
	if err != nil || !alive(pid) {
		return
	}
	_ = syscall.Kill(pid, syscall.SIGKILL)
	deadline := waitguard.Deadline(100 * time.Millisecond)
	for alive(pid) && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
}

// Restart stops the node if it is running (gracefully), then starts it again
// with the same name, ports and data, and waits until it is ready.
func (n *Node) Restart(ctx context.Context) error {
	if err := n.Stop(ctx); err != nil {
		return err
	}
	// Wait for the OS to release the listening ports: at once, as a rule,
	// once the process is gone; a hang guard.
	deadline := waitguard.Deadline(100 * time.Millisecond)
	for time.Now().Before(deadline) && !n.portsFree() {
		if err := sleep(ctx, 100*time.Millisecond); err != nil {
			return err
		}
	}
	return n.start(ctx)
}

// JoinCluster makes n a member of seed's cluster: stop_app, join_cluster,
// start_app, then waits for n to be ready again. n's data is discarded by
// RabbitMQ. Both nodes must share the Erlang cookie (same BaseDir in
// NodeConfig, hence the same Home).
func (n *Node) JoinCluster(ctx context.Context, seed *Node) error {
	if n.Home != seed.Home {
		a, _ := os.ReadFile(filepath.Join(n.Home, ".erlang.cookie"))
		b, _ := os.ReadFile(filepath.Join(seed.Home, ".erlang.cookie"))
		if !bytes.Equal(a, b) {
			return fmt.Errorf("brokertest: %s and %s have different Erlang cookies (%s, %s); start them with the same BaseDir",
				n.Name, seed.Name, n.Home, seed.Home)
		}
	}
	for _, args := range [][]string{{"stop_app"}, {"join_cluster", seed.Name}, {"start_app"}} {
		if _, err := n.Ctl(ctx, args...); err != nil {
			return fmt.Errorf("brokertest: %s joining %s: %w", n.Name, seed.Name, err)
		}
	}
	// A hang guard on the rabbit app's boot in the running VM (seconds on
	// a quiet machine), never under the 60 s it was.
	awaitSecs := strconv.Itoa(int(waitguard.AtLeast(5*time.Second, time.Minute).Seconds()))
	if _, err := n.Ctl(ctx, "await_startup", "--timeout", awaitSecs); err != nil {
		return fmt.Errorf("brokertest: %s after joining %s: %w", n.Name, seed.Name, err)
	}
	pid, _ := n.PID()
	return n.waitMgmt(ctx, pid)
}

// LogTail returns the last lines of the node's log (or a note saying why
// there is none).
func (n *Node) LogTail(lines int) string { return tailFile(n.LogFile(), lines) }

// firstErrors returns the first lines of a log marked [error]: the cause of
// a boot failure comes first, the crash reports follow.
func firstErrors(path string, max int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(no log: %v)", err)
	}
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		if strings.Contains(l, "[error]") && len(out) < max {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

func tailFile(path string, lines int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(no log: %v)", err)
	}
	return lastLines(string(b), lines)
}
